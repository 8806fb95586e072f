#!/usr/bin/python3
"""Unit test of scripts/mail_check.py: the checks of mail-roundtrip on a
small series mailed into a Maildir, then on damaged copies of it.

  cd scripts/tests && python3 -m unittest -v test_mail_check
"""
import email.message
import mailbox
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mail_check  # noqa: E402

WANTED = {"a@example.org", "list@vger.kernel.org"}


def mail(subject, msgid, reply_to=None, to="A <a@example.org>",
         cc="list@vger.kernel.org"):
    m = email.message.Message()
    m["Subject"] = subject
    m["Message-Id"] = msgid
    m["To"] = to
    m["Cc"] = cc
    if reply_to:
        m["In-Reply-To"] = reply_to
        m["References"] = reply_to
    m.set_payload("body\n")
    return m


class MailCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.files = []
        self.mails = []
        subjects = ["[PATCH v3 0/2] proc: the series", "[PATCH v3 1/2] proc: one",
                    "[PATCH v3 2/2] proc: two"]
        for n, subject in enumerate(subjects):
            path = os.path.join(self.tmp.name, f"v3-000{n}.patch")
            with open(path, "w") as f:
                f.write(f"Subject: {subject}\n\nbody\n")
            self.files.append(path)
            m = mail(subject, f"<{n}@x>", None if n == 0 else "<0@x>")
            self.mails.append((m, m.as_bytes()))

    def tearDown(self):
        self.tmp.cleanup()

    def test_good_series(self):
        results, by_n = mail_check.check(self.mails, self.files, "3", WANTED)
        self.assertEqual([ok for ok, _, _ in results], [True] * 4, results)
        self.assertEqual(sorted(by_n), [0, 1, 2])

    def test_maildir_roundtrip(self):
        box = mailbox.Maildir(os.path.join(self.tmp.name, "Maildir"))
        for m, _ in self.mails:
            box.add(m)
        mails = mail_check.read_maildir(os.path.join(self.tmp.name, "Maildir"))
        results, _ = mail_check.check(mails, self.files, "3", WANTED)
        self.assertTrue(all(ok for ok, _, _ in results), results)

    def test_missing_mail(self):
        results, _ = mail_check.check(self.mails[:2], self.files, "3", WANTED)
        self.assertEqual([ok for ok, _, _ in results], [False, False, True, False])

    def test_missing_recipient(self):
        m = mail("[PATCH v3 1/2] proc: one", "<1@x>", "<0@x>", cc="")
        results, _ = mail_check.check([self.mails[0], (m, m.as_bytes()), self.mails[2]],
                                      self.files, "3", WANTED)
        self.assertEqual([ok for ok, _, _ in results], [True, True, False, True])
        self.assertIn("1/2 lacks list@vger.kernel.org", results[2][2])

    def test_broken_thread(self):
        m = mail("[PATCH v3 2/2] proc: two", "<2@x>", "<1@x>")
        results, _ = mail_check.check(self.mails[:2] + [(m, m.as_bytes())],
                                      self.files, "3", WANTED)
        self.assertEqual([ok for ok, _, _ in results], [True, True, True, False])

    def test_wrong_subject(self):
        m = mail("[PATCH v2 2/2] proc: two", "<2@x>", "<0@x>")
        results, _ = mail_check.check(self.mails[:2] + [(m, m.as_bytes())],
                                      self.files, "3", WANTED)
        self.assertFalse(results[1][0])


if __name__ == "__main__":
    unittest.main()
