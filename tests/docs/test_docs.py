"""What users read holds together: every relative Markdown link reaches its file (and its heading, when it names
one), no text a user reads cites our internal issue numbers, which they cannot look up (releases, dates and
commits instead: CHANGELOG.md), the stated size of each method's diff against the template is its size, and the
README and every Markdown line keep to their lengths."""

import os
import re
import subprocess

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# [text](target) outside code: the target up to a space or the closing parenthesis (titles are not used here)
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")  # a link or an image
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")
# "issue 29", "Issue 46's", "issues 17 and 18", "issue #3", "issue22", an anchor's "issue-29": what only our
# tracker can resolve
ISSUE_NUMBER = re.compile(r"(?<![a-z])issues?[\s_#-]*\d+", re.IGNORECASE)


def tracked_files() -> list:
    """The repository's tracked files (what a clone has) that the work tree still holds, relative to its root."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    return [name for name in listing.decode().split("\0") if name and os.path.isfile(os.path.join(REPO_ROOT, name))]


def markdown_files() -> list:
    return [name for name in tracked_files() if name.endswith(".md")]


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: inline markup dropped, lower case, punctuation but '-' and '_' removed,
    spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\*{1,3}([^*]+)\*{1,3}", r"\1", text)
    text = re.sub(r"(?<!\w)_{1,3}([^_]+)_{1,3}(?!\w)", r"\1", text)  # an underscore inside a word is no emphasis
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path: str):
    """(line number, line) of a Markdown file outside fenced code blocks."""
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, line


def anchors(path: str) -> set:
    """Every anchor of a Markdown file: its headings', GitHub's way (a repeated heading gets -1, -2, ...), and
    those of its HTML anchors (<a id="...">)."""
    seen, result = {}, set()
    for _, line in prose_lines(path):
        result.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def broken_links(path: str, anchor_cache: dict) -> list:
    """The relative links of ``path`` whose file or heading does not exist, as 'line N: target (why)'."""
    problems = []
    for number, line in prose_lines(path):
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"line {number}: {target} (no such file)")
                continue
            if anchor and resolved.endswith(".md"):
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors(resolved)
                if anchor not in anchor_cache[resolved]:
                    problems.append(f"line {number}: {target} (no heading #{anchor} in {os.path.relpath(resolved)})")
    return problems


def test_github_slug_follows_githubs_rules():
    assert github_slug("At the paper's length, at v0.2's defaults") == "at-the-papers-length-at-v02s-defaults"
    assert github_slug("The first demo (`scripts/mini_benchmark.sh`, 3 seeds): it misled us") == \
        "the-first-demo-scriptsmini_benchmarksh-3-seeds-it-misled-us"
    assert github_slug("PPO_ReDo screen") == "ppo_redo-screen"
    assert github_slug("PPO_ReDo (`ppo_redo_continuous.py`)") == "ppo_redo-ppo_redo_continuouspy"
    assert github_slug("_Emphasis_ here") == "emphasis-here"
    assert github_slug("**Bold** and [a link](x.md)") == "bold-and-a-link"


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n\n## Twice\n\n## Twice\n\n- <a id=\"here\"></a>**a point**\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading) [ok2](other.md#twice-1) [ok3](other.md#here) ![image](other.md) "
                    "[gone](missing.md) [nohead](other.md#nope)\n"
                    "[web](https://example.org/x#y) `[code](missing2.md)`\n```\n[fenced](missing3.md)\n```\n")
    problems = broken_links(str(page), {})
    assert problems == ["line 1: missing.md (no such file)", f"line 1: other.md#nope (no heading #nope in "
                        f"{os.path.relpath(str(tmp_path / 'other.md'))})"]


def test_every_relative_link_of_the_docs_reaches_its_file_and_heading():
    cache, problems = {}, []
    for name in markdown_files():
        problems += [f"{name}, {problem}" for problem in broken_links(os.path.join(REPO_ROOT, name), cache)]
    assert not problems, "\n".join(problems)


def test_the_issue_pattern_finds_what_a_user_cannot_look_up():
    for text in ("issue 29", "Issue 46's default", "issues 17 and 18", "issue #3", "bench_issue22.sh", "issue22.log",
                 "#the-open-choice-issue-29"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("the issue is", "an issue with 29 seeds", "v0.2 (2026-11-27, d3270e2)"):
        assert not ISSUE_NUMBER.search(text), text


def test_what_users_read_cites_no_issue_numbers():
    """README, CHANGELOG, docs/ (the reference and the studies' records), the scripts, their tools and tests: every
    text file a user reads, by its name or its text (this file's examples above aside)."""
    this_file = os.path.relpath(os.path.abspath(__file__), REPO_ROOT)
    read = [name for name in tracked_files() if name != this_file
            and name.endswith((".md", ".py", ".sh", ".txt", ".tsv", ".csv", ".log", ".json", "run"))]
    found = [f"{name} (its name)" for name in read if ISSUE_NUMBER.search(name)]
    for name in read:
        with open(os.path.join(REPO_ROOT, name), encoding="utf-8", errors="replace") as f:
            found += [f"{name}, line {number}: {line.strip()[:100]}" for number, line in enumerate(f, start=1)
                      if ISSUE_NUMBER.search(line)]
    assert not found, "\n".join(found)


# Where the docs state how many lines `diff ppo_continuous.py X_continuous.py` changes: (file, pattern with the
# count as its group, script). The count is what `diff`'s output has of lines starting with < or >.
STATED_DIFF_SIZES = [
    ("docs/reading-guide.md", r"diff ppo_continuous.py eppo_continuous.py` top to bottom \((\d+) changed lines",
     "eppo_continuous.py"),
    ("docs/reading-guide.md", r"`ppo_redo_continuous.py` \(ReDo, Sokar et al., 2023\), (\d+) changed lines",
     "ppo_redo_continuous.py"),
    ("docs/baselines.md", r"\((\d+) changed lines in `diff ppo_continuous.py ppo_redo_continuous.py`\)",
     "ppo_redo_continuous.py"),
    ("docs/reading-guide.md", r"Written from this guide alone: (\d+) changed lines", "ppo_snp_continuous.py"),
    ("docs/baselines.md", r"(\d+) changed lines in `diff ppo_continuous.py ppo_snp_continuous.py`",
     "ppo_snp_continuous.py"),
]


def changed_lines(script: str) -> int:
    """The lines `diff ppo_continuous.py script` marks as removed or added."""
    result = subprocess.run(["diff", "ppo_continuous.py", script], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode in (0, 1), result.stderr
    return sum(1 for line in result.stdout.splitlines() if line.startswith(("<", ">")))


@pytest.mark.parametrize("path, pattern, script", STATED_DIFF_SIZES)
def test_the_stated_size_of_each_methods_diff_is_its_size(path, pattern, script):
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
        found = re.findall(pattern, " ".join(f.read().split()))  # a statement may be wrapped over lines
    assert len(found) == 1, f"{path}: the statement {pattern!r} is not there once"
    assert int(found[0]) == changed_lines(script), f"{path} says {found[0]} changed lines for {script}"


def test_the_readme_is_a_reference_of_at_most_200_lines_of_at_most_120_characters():
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= 200, len(lines)
    assert not [f"line {n}: {len(line)}" for n, line in enumerate(lines, start=1) if len(line) > 120]


def test_no_markdown_line_outside_a_table_runs_past_400_characters_and_docs_holds_no_study():
    """The studies live in studies/, beside tests/studies/; docs/ is the reference. A table row may be as wide as
    its columns; any other line of any Markdown file breaks by 400 characters."""
    assert not os.path.exists(os.path.join(REPO_ROOT, "docs", "studies"))
    too_long = []
    for name in markdown_files():
        with open(os.path.join(REPO_ROOT, name), encoding="utf-8") as f:
            too_long += [f"{name}, line {n}: {len(line)}" for n, line in enumerate(f.read().splitlines(), start=1)
                         if len(line) > 400 and not line.lstrip().startswith("|")]
    assert not too_long, "\n".join(too_long)
