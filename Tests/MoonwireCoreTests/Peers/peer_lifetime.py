"""What keeps a test peer serving: its parent, the test run that started it."""
import asyncio
import os


async def until_parent_exits():
    """Returns once the process that started this peer is gone (a test run that ended
    or was killed): a peer never outlives its run, holding its ports and output open."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(1)
