#!/usr/bin/env python3
"""A TCP proxy that delays every byte by a fixed time in each direction, in order: a
database "45 ms away" on loopback, where the kernel has no netem.

Usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS   (both on 127.0.0.1)
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    # Each chunk is due `delay` after it arrived; a queue keeps them in order, so a later
    # chunk never overtakes an earlier one.
    loop = asyncio.get_running_loop()
    q = asyncio.Queue()

    async def feed():
        while True:
            data = await reader.read(65536)
            await q.put((loop.time() + delay, data))
            if not data:
                return

    async def drain():
        while True:
            due, data = await q.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    try:
        await asyncio.gather(feed(), drain())
    except (ConnectionError, OSError):
        writer.close()


async def main():
    listen, target, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    delay = delay_ms / 1000.0

    async def serve(cr, cw):
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, delay))

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


asyncio.run(main())
