"""Performance: Cells, the analytic estimator, calibration and the Cell tuner."""
