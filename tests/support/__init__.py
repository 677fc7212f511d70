"""Helpers shared by the test suites: a real daemon process and a raw protocol client."""
