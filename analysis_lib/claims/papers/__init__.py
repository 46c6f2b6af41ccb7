"""One module per paper: its claims (:class:`~analysis_lib.claims.claim.Claim`), each beside
the function that computes its evidence from a chapter's results."""
