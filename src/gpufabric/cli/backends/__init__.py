"""Where a command acts: the backend protocol (``base``), the store here (``local``), a running
server's API (``remote``) and the choice between them (``choose``)."""
