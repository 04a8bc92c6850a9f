"""Every write for every caller: authorised, logged, composed in one store transaction."""
