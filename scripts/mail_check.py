#!/usr/bin/python3
"""Check the mails that scripts/mail-roundtrip sent to its local SMTP server.

  mail_check.py MAILDIR OUTDIR VERSION RECIPIENTS FILE...

MAILDIR is where the server stored them; FILEs are the cover letter and
the patches of patches/, in order; RECIPIENTS a file with one address per
line (lib.sh series_recipients). Checks: one mail per FILE, subjects
"[PATCH vVERSION N/M] ..." as in the FILEs, every mail To/Cc every
recipient, every patch In-Reply-To and References the cover letter. Prints
one TAP line per check ("ok - mail: ..." / "not ok - mail: ... (why)") and
writes the mails, in series order, to OUTDIR/NNNN.eml for git am. Exit 0
when every check passed, else 1.
"""
import email.policy
import email.utils
import mailbox
import os
import re
import sys


def header(msg, name):
    return " ".join(str(msg.get(name, "")).split())


def addresses(values):
    return {a.lower() for _, a in email.utils.getaddresses(values) if a}


def read_maildir(maildir):
    """The mails of MAILDIR: a list of (message, raw bytes)."""
    mails = []
    if os.path.isdir(maildir):
        box = mailbox.Maildir(maildir, create=False)
        for key in box.keys():
            raw = box.get_bytes(key)
            mails.append((email.message_from_bytes(raw, policy=email.policy.compat32), raw))
    return mails


def check(mails, files, version, wanted):
    """Check MAILS against the patch FILES (cover letter first), VERSION and
    the WANTED addresses. Returns ([(ok, name, why)], {n: (msg, raw)})."""
    results = []
    total = len(files) - 1

    def result(ok, name, why=""):
        results.append((bool(ok), name, "" if ok else why))

    result(len(mails) == len(files),
           f"{len(files)} mails arrive, one per file in patches/",
           f"got {len(mails)}")

    # Subjects: "[PATCH vV N/M] title", N = 0 (cover letter) .. M, each as
    # in the patch file.
    pat = re.compile(r"^\[PATCH v%s (\d+)/%d\] \S" % (re.escape(version), total))
    by_n, bad = {}, []
    for msg, raw in mails:
        subj = header(msg, "Subject")
        m = pat.match(subj)
        if m and int(m.group(1)) <= total and int(m.group(1)) not in by_n:
            by_n[int(m.group(1))] = (msg, raw)
        else:
            bad.append(subj or "(no subject)")
    for n, path in enumerate(files):
        with open(path, "rb") as f:
            want = header(email.message_from_binary_file(f), "Subject")
        got = header(by_n[n][0], "Subject") if n in by_n else None
        if got != want:
            bad.append(f"{os.path.basename(path)}: got {got!r}, want {want!r}")
    nothing = "no mails arrived" if not mails else ""
    result(not bad and len(by_n) == len(files),
           f"subjects are [PATCH v{version} N/{total}] as in patches/, cover letter 0/{total}",
           nothing or "; ".join(bad[:3]))

    # Recipients: every mail is To/Cc every wanted address.
    bad = []
    for n, (msg, _) in sorted(by_n.items()):
        got = addresses(msg.get_all("To", []) + msg.get_all("Cc", []))
        missing = sorted(wanted - got)
        if missing:
            bad.append(f"{n}/{total} lacks {', '.join(missing)}")
    result(bool(by_n) and not bad,
           "every mail is To/Cc " + ", ".join(sorted(wanted)),
           nothing or "; ".join(bad[:3]))

    # Threading: each patch replies to the cover letter.
    bad = []
    cover_id = header(by_n[0][0], "Message-Id") if 0 in by_n else ""
    if not cover_id:
        bad.append(nothing or "no cover letter with a Message-Id")
    for n, (msg, _) in sorted(by_n.items()):
        if n == 0:
            continue
        irt, refs = header(msg, "In-Reply-To"), header(msg, "References")
        if irt != cover_id or refs != cover_id:
            bad.append(f"{n}/{total}: In-Reply-To {irt!r}, References {refs!r}")
    result(not bad and len(by_n) == len(files),
           "each patch has In-Reply-To and References = the cover letter's Message-Id",
           "; ".join(bad[:2]) or "mails missing")
    return results, by_n


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__.strip().split("\n\n")[1])
    maildir, outdir, version, rcpt_file = argv[:4]
    files = argv[4:]
    with open(rcpt_file) as f:
        wanted = addresses([line.strip() for line in f if line.strip()])
    results, by_n = check(read_maildir(maildir), files, version, wanted)
    for ok, name, why in results:
        print(("ok" if ok else "not ok") + " - mail: " + name
              + (f" ({why})" if why else ""), flush=True)
    # Hand the mails over to git am in series order.
    for n, (_, raw) in sorted(by_n.items()):
        with open(os.path.join(outdir, "%04d.eml" % n), "wb") as f:
            f.write(raw)
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
