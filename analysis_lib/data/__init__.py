"""Text in: named corpora, supervised tasks with fixed splits, synthetic representations.

``corpora``    sentences as word lists (packaged tweets and BBC news, hub corpora, your text)
``tasks``      labelled tasks with deterministic splits, for fine-tuning and probes
``synthetic``  representations with known relations, for checking the measures
"""
