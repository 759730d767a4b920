"""End-to-end: boots the real compose lab (offline stand-ins when no registry answers)."""
