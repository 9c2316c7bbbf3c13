"""Alerts on scheduled audits: two Prefect automations that send a notification when a dpaudit flow
run fails or crashes, and when a scheduled one is late (no `dpaudit serve` picked it up in time).

    PREFECT_API_URL=http://127.0.0.1:4200/api python deploy/alerts.py --block slack-webhook/dpaudit

``--block`` names a notification block (``<block type slug>/<block name>``) made beforehand, in the
UI (Blocks, +: Slack, Microsoft Teams, email, a custom webhook, ...) or in Python. Both automations
match flow runs tagged ``dpaudit`` (every audit run and ``dpaudit serve`` deployment carries it;
``--tag`` narrows them, e.g. to ``nightly``, a spec's ``audit.tags``). Run again to replace them.
"""

from __future__ import annotations

import argparse

FAILED = "dpaudit: audit failed"
LATE = "dpaudit: scheduled audit late"

BODY = (
    "{{ flow_run.name }}: {{ flow_run.state.name }}"
    "{% if flow_run.state.message %} ({{ flow_run.state.message }}){% endif %}\n"
    "deployment: {{ deployment.name if deployment else '-' }}; tags: {{ flow_run.tags | join(', ') }}\n"
    "{% set url = flow_run | ui_url %}{{ url if url else 'flow run ' ~ flow_run.id }}"
)


def create_alerts(block: str, tag: str = "dpaudit") -> list[str]:
    """Create (or replace) the two automations; return their ids."""
    from prefect.automations import Automation
    from prefect.blocks.core import Block
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    block_id = Block.load(block)._block_document_id
    ids = []
    for name, events, what in (
        (FAILED, {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}, "failed"),
        (LATE, {"prefect.flow-run.Late"}, "is late"),
    ):
        try:
            Automation.read(name=name).delete()
        except ValueError:  # none yet
            pass
        auto = Automation(
            name=name,
            description=f"a dpaudit flow run tagged {tag!r} {what}",
            trigger=EventTrigger(
                expect=events,
                match_related={
                    "prefect.resource.role": "tag",
                    "prefect.resource.id": f"prefect.tag.{tag}",
                },
                posture=Posture.Reactive,
                threshold=1,
                within=0,
            ),
            actions=[
                SendNotification(
                    block_document_id=block_id,
                    subject=f"dpaudit: {{{{ flow_run.name }}}} {what}",
                    body=BODY,
                )
            ],
        ).create()
        ids.append(str(auto.id))
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", required=True, help="notification block, <type slug>/<name>")
    parser.add_argument("--tag", default="dpaudit", help="flow-run tag to watch (default: dpaudit)")
    args = parser.parse_args()
    for name, auto_id in zip((FAILED, LATE), create_alerts(args.block, args.tag), strict=True):
        print(f"automation {name!r}: {auto_id}")


if __name__ == "__main__":
    main()
