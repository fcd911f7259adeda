#!/usr/bin/env python3
"""MQTT 3.1.1 clients for bench-mqtt.sh (not part of weir): the publisher, the round-trip
probe, and `ref`, the simplest durable consumer, the bench's yardstick.

    mqtt-bench-client.py publish PORT N SIZE         # N QoS 1 messages on bench/t
    mqtt-bench-client.py rtt PORT                    # mean PUBLISH -> PUBACK round trip, ms
    mqtt-bench-client.py setup PORT CLIENT_ID        # persistent session + SUBSCRIBE bench/#
    mqtt-bench-client.py drain PORT CLIENT_ID N FILE # `ref`: receive N, durable, then exit

publish: N QoS 1 messages of SIZE bytes (a 10-digit sequence number, then padding), up
to 1000 in flight; returns once the broker acked every one. (Not mosquitto_pub -l: it
writes faster than it reads the PUBACKs, the broker disconnects it "due to out of
memory" after ~35k messages, and it still exits 0.)

rtt: 1000 QoS 1 PUBLISH -> PUBACK exchanges one at a time, on a topic outside the
bench's subscription; prints the mean in ms.

drain (`ref`): one thread, no hand-over between threads: read what the socket holds,
append the payloads to a file, fdatasync it, then send the PUBACKs of those messages in
one write, and again. It does what weir's MQTT source does for durability (no ack before
the fsync that covers the message, acks in arrival order) and nothing else: no WAL
framing, no checksums, no bounds, no reconnects. Its rate is what a consumer that acks
only durable messages reaches on this broker and this disk, measured rather than
computed. It prints: messages received, distinct sequence numbers, fsyncs, its own CPU
seconds, and the seconds from its CONNECT to its last PUBACK written (the interpreter's
start-up, 0.05-0.4 s with a pyenv shim, left out: it is Python's, not the consumer's).
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


def connect(port, client_id, clean):
    """A connection with CONNACK accepted. Clean session off: the broker keeps the
    subscription and queues while the client is offline."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    flags = b"\x02" if clean else b"\x00"
    s.sendall(packet(0x10, mqtt_str(b"MQTT") + b"\x04" + flags + struct.pack(">H", 60) + mqtt_str(client_id)))
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


def publish(port, n, size):
    s = connect(port, b"bench-pub", clean=True)
    pad = b"x" * (size - 10)
    topic = mqtt_str(b"bench/t")
    window, acked, extra, pending = 1000, 0, 0, []

    def read_acks():
        nonlocal acked, extra
        data = s.recv(1 << 16)
        if not data:
            sys.exit("the broker closed the connection")
        # Only PUBACKs (4 bytes each) come back to a publisher.
        extra += len(data)
        acked += extra // 4
        extra %= 4

    for i in range(n):
        pid = i % 65535 + 1
        pending.append(packet(0x32, topic + struct.pack(">H", pid) + b"%010d" % i + pad))
        if len(pending) >= 100 or i == n - 1:
            s.sendall(b"".join(pending))
            pending.clear()
        while i + 1 - acked >= window:
            read_acks()
    while acked < n:
        read_acks()
    s.sendall(b"\xe0\x00")
    s.close()


def rtt(port):
    s = connect(port, b"bench-rtt", clean=True)
    n, started = 1000, time.perf_counter()
    for i in range(n):
        s.sendall(packet(0x32, mqtt_str(b"rtt/probe") + struct.pack(">H", i + 1) + b"x" * 10))
        recv_exact(s, 4)
    print("%.4f" % ((time.perf_counter() - started) * 1000 / n))
    s.sendall(b"\xe0\x00")
    s.close()


def setup(port, client_id):
    s = connect(port, client_id, clean=False)
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
    s = connect(port, client_id, clean=False)
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
    mode, port, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if mode == "publish":
        publish(port, int(args[0]), int(args[1]))
    elif mode == "rtt":
        rtt(port)
    elif mode == "setup":
        setup(port, args[0].encode())
    elif mode == "drain":
        drain(port, args[0].encode(), int(args[1]), args[2])
    else:
        sys.exit("unknown mode %s" % mode)


if __name__ == "__main__":
    main()
