#!/usr/bin/env python3
"""A stand-in for torchrun's agent store: a TCP server speaking PyTorch 2.x's TCPStore wire
protocol (torch/csrc/distributed/c10d/TCPStore.cpp, TCPStoreBackend.hpp) for the queries a
client of it sends: VALIDATE, SET, GET, ADD, CHECK, WAIT. Integers are little-endian; strings
and values are a u64 length and the bytes. Debian's torchrun (PyTorch 1.13) does not start on
Python 3.11 and speaks the older protocol, so the tests emulate the agent with this.

usage: torch_store_server.py PORT   (serves on 127.0.0.1:PORT until killed; prints "ready")
"""
import socket
import struct
import sys
import threading

VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT = range(7)
MAGIC = 0x3C85F7CE
store = {}
changed = threading.Condition()


def read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def read_u64(conn):
    return struct.unpack("<Q", read_exact(conn, 8))[0]


def read_bytes(conn):
    return read_exact(conn, read_u64(conn))


def serve(conn):
    try:
        while True:
            query = read_exact(conn, 1)[0]
            if query == VALIDATE:
                if struct.unpack("<I", read_exact(conn, 4))[0] != MAGIC:
                    return
            elif query == SET:
                key, value = read_bytes(conn), read_bytes(conn)
                with changed:
                    store[key] = value
                    changed.notify_all()
            elif query == GET:
                key = read_bytes(conn)
                with changed:
                    value = store[key]
                conn.sendall(struct.pack("<Q", len(value)) + value)
            elif query == ADD:
                key = read_bytes(conn)
                delta = struct.unpack("<q", read_exact(conn, 8))[0]
                with changed:
                    total = int(store.get(key, b"0")) + delta
                    store[key] = str(total).encode()
                    changed.notify_all()
                conn.sendall(struct.pack("<q", total))
            elif query in (CHECK, WAIT):
                keys = [read_bytes(conn) for _ in range(read_u64(conn))]
                with changed:
                    if query == WAIT:
                        changed.wait_for(lambda: all(k in store for k in keys))
                    ready = all(k in store for k in keys)
                conn.sendall(bytes([0 if ready else 1]))
            else:
                return
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
