"""The replay as a self-contained HTML page: imbalance, node loads and migrations over the day.

Plotly's JavaScript is embedded in the file, not fetched from a CDN, so the report
opens on an air-gapped management network and can be attached to a ticket.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..replay import Replay, ping_pongs, summary


def write_html(result: Replay, path: str) -> None:
    figure(result).write_html(path, include_plotlyjs=True, full_html=True)


def figure(result: Replay) -> go.Figure:
    s = result.settings
    hours = [t / 3600 for t in result.trace_s]
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        row_heights=(0.4, 0.4, 0.2),
        specs=[[{}], [{}], [{"type": "table"}]],
        subplot_titles=("Imbalance", "Node load", "Per day"),
    )
    fig.add_trace(
        go.Scatter(x=hours, y=list(result.imbalance), name="imbalance", line={"color": "#1f77b4"}), row=1, col=1
    )
    fig.add_hline(
        y=s.threshold,
        line={"dash": "dash", "color": "#d62728"},
        row=1,
        col=1,
        annotation_text=f"threshold {s.threshold:g}",
    )
    _migration_markers(fig, result)
    for name in result.node_loads[0] if result.node_loads else ():
        fig.add_trace(
            go.Scatter(
                x=hours,
                y=[loads.get(name) for loads in result.node_loads],
                name=name,
                line={"width": 1},
                legendgroup="nodes",
            ),
            row=2,
            col=1,
        )
    out = summary(result)
    _days_table(fig, out["days"])
    q = out["imbalance"]
    fig.update_layout(
        title=(
            f"Replay: mode {s.mode}, method {s.method}, threshold {s.threshold:g}, hold {s.hold_duration}, "
            f"margin {s.margin:g} — p50 {q['p50']:.3f}, p90 {q['p90']:.3f}, max {q['max']:.3f}; "
            f"{out['share_above_threshold']:.0%} of rounds above threshold; "
            f"{out['migrations']['per_day']:.1f} migrations and {out['gib_moved_per_day']:.0f} GiB a day; "
            f"{out['ping_pongs']} ping-pong; {_paid(out['moves_paid'])}"
        ),
        title_font_size=13,
        height=1000,
        hovermode="x unified",
    )
    fig.update_xaxes(title_text="trace time (hours)", row=2, col=1)
    fig.update_yaxes(rangemode="tozero")
    return fig


def _migration_markers(fig: go.Figure, result: Replay) -> None:
    """Each migration as a marker on the imbalance line where it started; ping-pong moves in red."""
    returning = {id(second) for _, second in ping_pongs(result.migrations)}
    by_time = dict(zip(result.trace_s, result.imbalance))
    for label, color, chosen in (
        ("migration", "#2ca02c", [m for m in result.migrations if id(m) not in returning]),
        ("ping-pong", "#d62728", [m for m in result.migrations if id(m) in returning]),
    ):
        if not chosen:
            continue
        fig.add_trace(
            go.Scatter(
                x=[m.started_s / 3600 for m in chosen],
                y=[by_time.get(m.started_s) for m in chosen],
                mode="markers",
                name=label,
                marker={"color": color, "size": 8, "symbol": "triangle-down"},
                text=[f"{m.sid} {m.source}→{m.target} ({m.outcome})" for m in chosen],
                hoverinfo="text",
            ),
            row=1,
            col=1,
        )


def _days_table(fig: go.Figure, days: list[dict[str, Any]]) -> None:
    """One row per trace day: day 1 places the crowded start, the days after it show the policy."""
    columns = {
        "day": [str(d["day"]) for d in days],
        "guest-minutes under pressure": [f"{d['guest_minutes_under_pressure']:.0f}" for d in days],
        "migrations": [str(d["migrations"]) for d in days],
        "rounds above threshold": [f"{d['rounds_above_threshold']:.1%}" for d in days],
        "GiB moved": [f"{d['gib_moved']:.0f}" for d in days],
        "moves paid": [_paid(d["moves_paid"]) for d in days],
    }
    fig.add_trace(go.Table(header={"values": list(columns)}, cells={"values": list(columns.values())}), row=3, col=1)


def _paid(counts: dict[str, Any]) -> str:
    """ "12 of 13 moves paid (92 %)", or that none was judged (crs.paid)."""
    if not counts["judged"]:
        return "no move judged paid or not"
    return f"{counts['paid']} of {counts['judged']} moves paid ({counts['share']:.0%})"
