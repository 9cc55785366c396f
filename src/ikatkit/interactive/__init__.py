"""The interactive task: ikatkit as a participant of the iKAT simulation API (see docs/interactive.md)."""
