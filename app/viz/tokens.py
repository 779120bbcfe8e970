"""Token view: a completion coloured by each token's probability, the value (and alternatives) on hover."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from app.viz.common import esc, fmt_num, shorten, wrap_for_hover, wrap_section


def find_call(record: dict[str, Any], call_id: str) -> dict[str, Any] | None:
    return next((c for c in record.get("lm_calls", []) if c.get("call_id") == call_id), None)


def calls_with_logprobs(record: dict[str, Any]) -> list[str]:
    return [c["call_id"] for c in record.get("lm_calls", []) if c.get("logprobs")]


def prob_color(p: float) -> str:
    """Red (unlikely) through yellow to green (likely), translucent so text stays readable."""
    hue = 120.0 * max(0.0, min(1.0, p))
    return f"hsla({hue:.0f},75%,50%,0.38)"


DRAFT_STYLE = "box-shadow:inset 0 -3px 0 #1e63d6"
"""Accepted speculative draft tokens: a blue underline beside the probability colour."""


def _token_span(item: dict[str, Any], drafted: bool = False) -> str:
    token = str(item.get("token", ""))
    logprob = item.get("logprob")
    draft_style = f";{DRAFT_STYLE}" if drafted else ""
    draft_note = " · accepted draft token" if drafted else ""
    if not isinstance(logprob, int | float) or math.isnan(logprob):
        return (f'<span class="mg-tok" style="{draft_style[1:]}" title="no log-probability{draft_note}">'
                f"{esc(token)}</span>")
    p = math.exp(logprob) if logprob > -700 else 0.0
    title = f"p = {p:.4f} · logprob {logprob:.4f}{draft_note}"
    top = item.get("top") or []
    if top:
        alts = ", ".join(f"{alt[0]!r} {math.exp(alt[1]):.3f}" for alt in top[:5]
                         if isinstance(alt, list | tuple) and len(alt) == 2 and isinstance(alt[1], int | float))
        title += f"\ntop: {alts}"
    return (f'<span class="mg-tok" style="background:{prob_color(p)}{draft_style}" title="{esc(title)}" '
            f'data-p="{p:.4f}"{" data-draft=1" if drafted else ""}>{esc(token)}</span>')


def speculation(call: dict[str, Any]) -> dict[str, Any]:
    """The speculative-decoding fields of an LM call (the event's own keys, kept under tag.extra in a trace)."""
    if "draft_tokens" in call:
        return call
    tag = call.get("tag")
    extra = tag.get("extra") if isinstance(tag, dict) else None
    return extra if isinstance(extra, dict) else {}


def speculation_line(call: dict[str, Any]) -> str:
    """Drafted / accepted tokens of a call made with speculative decoding ('' for any other call)."""
    fields = speculation(call)
    drafted, accepted = fields.get("draft_tokens"), fields.get("draft_accepted")
    if not isinstance(drafted, int) or not isinstance(accepted, int) or not drafted:
        return ""
    return (f'<p class="mg-muted">speculative decoding: {accepted} of {drafted} draft tokens accepted '
            f'({accepted / drafted:.0%}); <span style="{DRAFT_STYLE}">underlined</span> tokens were accepted '
            "drafts</p>")


def token_view_body(record: dict[str, Any], call_id: str) -> str:
    call = find_call(record, call_id)
    if call is None:
        return f'<p class="mg-muted">No LM call {esc(call_id)} in this run.</p>'
    head = (f"<h3>{esc(call_id)} · {esc(call.get('purpose'))} · sample {esc(call.get('sample_index'))} · "
            f"{fmt_num(call.get('completion_tokens'))} tokens · {esc(call.get('finish_reason'))}</h3>")
    prompt = (f"<details><summary>prompt ({fmt_num(call.get('prompt_tokens'))} tokens): "
              f"{esc(shorten(call.get('prompt'), 80))}</summary><div class=mg-text>{esc(call.get('prompt'))}</div>"
              "</details>")
    logprobs = call.get("logprobs")
    if not logprobs:
        return (head + prompt + '<p class="mg-muted">No per-token log-probabilities were recorded for this call '
                "(turn on the node's logprobs param to record them).</p>"
                f"<div class=mg-text>{esc(call.get('completion'))}</div>{speculation_line(call)}")
    flags = speculation(call).get("accepted_draft") or []
    spans = "".join(_token_span(item, i < len(flags) and bool(flags[i])) for i, item in enumerate(logprobs))
    probs = [math.exp(i["logprob"]) for i in logprobs if isinstance(i.get("logprob"), int | float)
             and i["logprob"] > -700]
    stats = (f'<p class="mg-muted">mean p {sum(probs) / len(probs):.3f} · min p {min(probs):.3f} · '
             f"hover a token for its probability</p>") if probs else ""
    legend = ('<div style="display:flex;align-items:center;gap:6px;font-size:12px">p=0'
              '<div style="width:160px;height:10px;background:linear-gradient(90deg,hsla(0,75%,50%,.6),'
              'hsla(60,75%,50%,.6),hsla(120,75%,50%,.6))"></div>p=1</div>')
    return f'{head}{prompt}{legend}<div class="mg-text mg-tokens">{spans}</div>{stats}{speculation_line(call)}'


def token_view_html(record: dict[str, Any], call_id: str) -> str:
    return wrap_section(f'<div class="mg-token-view" data-call="{esc(call_id)}">'
                        f"{token_view_body(record, call_id)}</div>")


def token_figure(record: dict[str, Any], call_id: str | None = None) -> go.Figure | None:
    """The token view as a figure: each completion token's probability for one LM call (the first call that
    recorded log-probabilities unless `call_id` is given), coloured as in the HTML view. None when the call (or
    every call) recorded no log-probabilities."""
    call = find_call(record, call_id) if call_id else next(
        (c for c in record.get("lm_calls", []) if c.get("logprobs")), None)
    items = [i for i in (call or {}).get("logprobs") or [] if isinstance(i.get("logprob"), int | float)]
    if call is None or not items:
        return None
    probs = [math.exp(i["logprob"]) if i["logprob"] > -700 else 0.0 for i in items]
    fig = go.Figure(go.Bar(
        x=list(range(len(items))), y=probs, marker={"color": [prob_color(p).replace("0.38)", "0.9)") for p in probs]},
        hovertext=[wrap_for_hover(f"{str(i.get('token', ''))!r}: p = {p:.4f}") for i, p in zip(items, probs,
                                                                                             strict=True)],
        hoverinfo="text"))
    fig.update_layout(title={"text": f"Token probabilities of {esc(call.get('call_id'))} · "
                                     f"{esc(shorten(call.get('completion'), 60))}", "font": {"size": 14}},
                      template="plotly_white", height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    fig.update_xaxes(title={"text": "completion token"})
    fig.update_yaxes(title={"text": "probability"}, range=[0, 1])
    return fig
