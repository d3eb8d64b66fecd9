"""Inverse questions: what to change so that a deployment starts or serves more."""
