"""bench/RESULTS.md as the peer scripts write it: each script owns the text
between its two HTML-comment markers and replaces it on each run."""

import os
import re
import subprocess


def build_revision(repo):
    """The short hash of the commit checked out in repo (the build measured)."""
    return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def replace_section(path, begin, end, body):
    """Replaces the text between the markers begin and end in path with body
    (the markers kept, each on its own line); appends the marked section where
    path has none, and starts the file where it does not exist."""
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    block = begin + "\n" + body + "\n" + end
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
