#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 in front of a Redis, that hands every byte of
the server's replies to the client DELAY_MS milliseconds after it came:
a Redis that answers late (a far or a loaded one) but in full, and keeps
as many commands in flight as the client sends.

Usage: DELAY_TO=PORT DELAY_MS=30 delay_proxy.py LOGFILE
Prints "PORT <n>" on stdout once listening. Appends to LOGFILE one line
per connection: "<monotonic seconds> conn <n>", and at its end
"<monotonic seconds> done <n> replies_bytes=<b> max_late_ms=<ms>", the
latest any byte went out past its due time (the proxy's own lag).
"""
import asyncio
import os
import sys
import time

TO = int(os.environ["DELAY_TO"])
DELAY = float(os.environ.get("DELAY_MS", "30")) / 1000.0
LOG = None
COUNT = 0


def log(line):
    LOG.write("%.6f %s\n" % (time.monotonic(), line))
    LOG.flush()


async def pump(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    try:
        writer.close()
    except OSError:
        pass


async def delayed(reader, writer, n):
    """Server -> client, each chunk DELAY after it arrived, in order."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    stats = {"bytes": 0, "late": 0.0}

    async def sender():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            stats["late"] = max(stats["late"], loop.time() - due)
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                break
            stats["bytes"] += len(data)

    task = asyncio.create_task(sender())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((loop.time() + DELAY, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((loop.time() + DELAY, None))
    await task
    try:
        writer.close()
    except OSError:
        pass
    log("done %d replies_bytes=%d max_late_ms=%.1f"
        % (n, stats["bytes"], stats["late"] * 1000))


async def handle(creader, cwriter):
    global COUNT
    COUNT += 1
    n = COUNT
    log("conn %d" % n)
    try:
        sreader, swriter = await asyncio.open_connection("127.0.0.1", TO)
    except OSError:
        cwriter.close()
        return
    await asyncio.gather(pump(creader, swriter), delayed(sreader, cwriter, n))


async def main():
    global LOG
    LOG = open(sys.argv[1], "a")
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
