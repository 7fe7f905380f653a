#!/usr/bin/python3
"""N concurrent raw-socket streaming /generate clients against a running
`sglc serve` (every fifth one vanishes after two chunks).  Dev tool, not a
test: prints a count of outcomes and the wall time.
usage: server_load.py N [PORT]"""
import asyncio, json, sys, time
N=int(sys.argv[1]); PORT=int(sys.argv[2]) if len(sys.argv)>2 else 31790
async def one(i, vanish):
    r,w = await asyncio.open_connection('127.0.0.1', PORT)
    body=json.dumps({"text":"Once upon a time","stream":True,"sampling_params":{"max_new_tokens":16,"temperature":0.8}}).encode()
    w.write(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"%len(body)+body)
    await w.drain()
    data=b""
    while True:
        chunk=await r.read(65536)
        if not chunk: break
        data+=chunk
        if vanish and data.count(b"data: ")>=2:
            w.close(); return "vanished"
        if b"data: [DONE]" in data: break
    w.close()
    return "ok" if data.startswith(b"HTTP/1.1 200") and b"[DONE]" in data else "bad:"+data[:200].decode(errors="replace")
async def main():
    t=time.time()
    res=await asyncio.gather(*[one(i, i%5==0) for i in range(N)])
    from collections import Counter
    print(Counter(r if not r.startswith("bad") else "bad" for r in res), [r for r in res if r.startswith("bad")][:2], "%.2fs"%(time.time()-t))
asyncio.run(main())
