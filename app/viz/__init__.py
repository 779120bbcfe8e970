"""Trace visualisations: Plotly figures and HTML fragments drawn from a run record (TraceStore.get_run)."""

from app.viz.evaluation import (
    accuracy_curve_figure,
    accuracy_tokens_figure,
    evaluation_report_html,
    evaluation_summary_html,
    items_table_html,
    pass_at_k_figure,
)
from app.viz.html_export import export_html
from app.viz.refine import refinement_html, word_diff_html
from app.viz.samples import (
    NO_ANSWER,
    candidate_nodes,
    sample_rows,
    sample_view,
    samples_html,
    vote_counts,
    vote_histogram,
)
from app.viz.summary import compare_runs_html, node_stats, run_summary, summary_html
from app.viz.timeline import collapsible_nodes, timeline_figure
from app.viz.tokens import calls_with_logprobs, token_view_html
from app.viz.tree import search_tree_figure, tree_html, tree_nodes_ids

__all__ = [
    "NO_ANSWER", "accuracy_curve_figure", "accuracy_tokens_figure", "calls_with_logprobs", "candidate_nodes",
    "collapsible_nodes",
    "compare_runs_html", "evaluation_report_html", "evaluation_summary_html", "export_html", "items_table_html",
    "node_stats", "pass_at_k_figure", "refinement_html", "run_summary", "sample_rows", "sample_view",
    "samples_html", "search_tree_figure", "summary_html", "timeline_figure", "token_view_html", "tree_html",
    "tree_nodes_ids", "vote_counts", "vote_histogram", "word_diff_html",
]
