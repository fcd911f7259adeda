#!/usr/bin/env python3
"""The simplest durable MQTT consumer, a yardstick for bench-mqtt.sh (not part of weir).

One thread, no hand-over between threads: read what the socket holds, append the
payloads to a file, fdatasync it, then send the PUBACKs of those messages in one write,
and again. It does what weir's MQTT source does for durability (no ack before the fsync
that covers the message, acks in arrival order) and nothing else: no WAL framing, no
checksums, no bounds, no reconnects. Its rate is what a consumer that acks only durable
messages reaches on this broker and this disk, measured rather than computed.

    mqtt-fsync-consumer.py PORT CLIENT_ID setup        # persistent session + SUBSCRIBE
    mqtt-fsync-consumer.py PORT CLIENT_ID drain N FILE # receive N, durable, then exit

`drain` prints: messages received, distinct sequence numbers (the payload's first 10
bytes, as bench-mqtt.sh publishes them), fsyncs, its own CPU seconds, and the seconds
from its CONNECT to its last PUBACK written (the interpreter's start-up, 0.05-0.4 s
with a pyenv shim, left out: it is Python's, not the consumer's).
MQTT 3.1.1, QoS 1, topic filter bench/#.
"""

import os
import socket
import struct
import sys
import time


def packet(header, body):
    out, length = bytearray([header]), len(body)
    while True:
        byte, length = length % 128, length // 128
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out) + body


def mqtt_str(text):
    return struct.pack(">H", len(text)) + text


def connect(port, client_id):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Clean session off: the broker keeps the subscription and queues while offline.
    s.sendall(packet(0x10, mqtt_str(b"MQTT") + b"\x04\x00" + struct.pack(">H", 60) + mqtt_str(client_id)))
    connack = recv_exact(s, 4)
    if connack[:2] != b"\x20\x02" or connack[3] != 0:
        sys.exit("CONNACK refused: %r" % connack)
    return s


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        data = s.recv(n - len(got))
        if not data:
            sys.exit("the broker closed the connection")
        got += data
    return got


def setup(port, client_id):
    s = connect(port, client_id)
    s.sendall(packet(0x82, struct.pack(">H", 1) + mqtt_str(b"bench/#") + b"\x01"))
    suback = recv_exact(s, 5)
    if suback[0] != 0x90 or suback[4] > 1:
        sys.exit("SUBACK refused: %r" % suback)
    s.sendall(b"\xe0\x00")
    s.close()


def parse(buf):
    """Complete packets at the front of buf → (payloads, PUBACKs, bytes consumed)."""
    payloads, acks, pos, end = [], [], 0, len(buf)
    while pos + 2 <= end:
        header, length, shift, i = buf[pos], 0, 0, pos + 1
        while True:
            if i >= end:
                return payloads, acks, pos
            byte = buf[i]
            length |= (byte & 0x7F) << shift
            shift += 7
            i += 1
            if not byte & 0x80:
                break
        if i + length > end:
            break
        if header >> 4 == 3:  # PUBLISH
            topic_len = (buf[i] << 8) | buf[i + 1]
            body = i + 2 + topic_len
            if (header >> 1) & 3:
                acks.append(b"\x40\x02" + bytes(buf[body : body + 2]))
                body += 2
            payloads.append(bytes(buf[body : i + length]))
        pos = i + length
    return payloads, acks, pos


def drain(port, client_id, n, path):
    started = time.perf_counter()
    s = connect(port, client_id)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    buf, received, fsyncs, seqs = bytearray(), 0, 0, set()
    while received < n:
        data = s.recv(1 << 20)
        if not data:
            sys.exit("the broker closed the connection after %d messages" % received)
        buf += data
        payloads, acks, used = parse(buf)
        del buf[:used]
        if not payloads:
            continue
        os.write(fd, b"\n".join(payloads) + b"\n")
        os.fdatasync(fd)
        fsyncs += 1
        s.sendall(b"".join(acks))
        received += len(payloads)
        seqs.update(p[:10] for p in payloads)
    elapsed = time.perf_counter() - started
    s.sendall(b"\xe0\x00")
    s.close()
    os.close(fd)
    cpu = time.process_time()
    print(received, len(seqs), fsyncs, "%.3f" % cpu, "%.6f" % elapsed)


def main():
    port, client_id, mode = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
    if mode == "setup":
        setup(port, client_id)
    elif mode == "drain":
        drain(port, client_id, int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("unknown mode %s" % mode)


if __name__ == "__main__":
    main()
