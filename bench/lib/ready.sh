# Sourced by bench scripts: the address a server it started prints on its READY line.
#   url=$(ready_address FILE [SECONDS])
# Waits up to SECONDS (10) for a line "READY ADDRESS ..." in FILE (the server's standard
# output) and prints ADDRESS (a URL, or a port for the peers' echo servers); prints nothing
# if none came in time, so the caller says which server did not start.
ready_address() {
    local file=$1 tries=$(( ${2:-10} * 20 ))
    for _ in $(seq "$tries"); do grep -qs READY "$file" && break; sleep 0.05; done
    awk '/READY/{print $2; exit}' "$file"
}
