"""A local stand-in for the organizers' simulation API: the same endpoints and messages on 127.0.0.1."""
