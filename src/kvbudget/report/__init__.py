"""Rendering: text tables and JSON documents. Reports never compute; they only format."""
