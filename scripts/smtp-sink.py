#!/usr/bin/python3
"""A loopback SMTP server that stores every message it accepts in a Maildir.

    smtp-sink.py MAILDIR [--lifetime SECONDS]

Used by scripts/mail-roundtrip. Runs Debian's python3-aiosmtpd (so it needs
/usr/bin/python3, not another interpreter without that package). It binds
127.0.0.1 on a port the kernel picks, so there is no race for a "free" port,
and prints that port on stdout, one line, only once it is listening. Each
message is stored as received (CRLF turned into LF, nothing else changed),
so whitespace damage made by the sender stays visible. One line per message
goes to stderr. It exits on SIGTERM or SIGINT, or after --lifetime seconds
(default 600) in case nobody stops it.
"""
import argparse
import asyncio
import mailbox
import signal
import socket
import sys

from aiosmtpd.smtp import SMTP


class MaildirHandler:
    def __init__(self, path):
        self.maildir = mailbox.Maildir(path, create=True)

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        key = self.maildir.add(raw.replace(b"\r\n", b"\n"))
        print(f"smtp-sink: stored {key}: from {envelope.mail_from} "
              f"to {len(envelope.rcpt_tos)} recipient(s)",
              file=sys.stderr, flush=True)
        return "250 OK"


async def serve(args):
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set_result, None)
    loop.call_later(args.lifetime, lambda: done.done() or done.set_result(None))

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    handler = MaildirHandler(args.maildir)
    # hostname= avoids a DNS look-up for the banner.
    server = await loop.create_server(
        lambda: SMTP(handler, hostname="localhost"), sock=sock)
    print(sock.getsockname()[1], flush=True)
    try:
        await done
    finally:
        server.close()
        await server.wait_closed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("maildir")
    ap.add_argument("--lifetime", type=float, default=600)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
