-- Found through --lpath (lib/?.lua, from .busted).
return { answer = 42 }
