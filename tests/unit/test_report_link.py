"""The report's entry in a run's Prefect artifacts: a link a browser follows from the UI where the
report is served (``output.report_url``) — checked by serving a report and following the link —
else its path and how to open it, never a ``file://`` link (a browser refuses those from a web
page); a bad ``output.report_url`` is refused by name."""

from __future__ import annotations

import functools
import re
import threading
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from auditlib.exceptions import SpecError
from flows.audit.artifacts import report_link
from flows.spec import parse_spec


def test_a_served_report_is_linked_where_it_is_served_and_the_link_opens_it(
    tmp_path: Path,
) -> None:
    report = tmp_path / "reports" / "audit 2026-11-29.html"
    report.parent.mkdir()
    report.write_text("<html><body>dpaudit report</body></html>")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(report.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        art = report_link("audit", "abc", str(report), base)
        (link,) = re.findall(r"\]\((\S+)\)", art.data)
        assert link.startswith(base) and "file:" not in art.data
        with urllib.request.urlopen(link, timeout=30) as page:  # what a click in the UI does
            assert page.status == 200 and b"dpaudit report" in page.read()
    finally:
        server.shutdown()
        server.server_close()


def test_an_unserved_report_gives_its_path_and_how_to_open_it(tmp_path: Path) -> None:
    art = report_link("audit", "abc", str(tmp_path / "r.html"))
    assert "file:" not in art.data and "](" not in art.data  # no link a browser would refuse
    assert str(tmp_path / "r.html") in art.data
    assert f"--directory {tmp_path}" in art.data and "output.report_url" in art.data
    # a report given as a URL is linked as it is
    web = report_link("audit", "abc", "https://example.org/r.html")
    assert web.data == "[https://example.org/r.html](https://example.org/r.html)"


@pytest.mark.parametrize("bad", ["file:///tmp/", "ftp://host/", "reports/", "http://"])
def test_a_report_url_that_is_not_http_is_refused(bad: str) -> None:
    with pytest.raises(SpecError, match=r"output\.report_url"):
        parse_spec({"output": {"report_url": bad}}, "spec")
    assert parse_spec({"output": {"report_url": "http://127.0.0.1:8000/"}}, "spec")
