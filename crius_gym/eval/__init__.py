"""Evaluation: run policies on traces, tables with confidence intervals, figures."""
