"""What four chapters still keep for themselves, on the way into the library's general
modules (a function another chapter or a reader could use belongs in the module of what it
takes; the running page, "Adding a claim, a measure or a chapter").

``representation``  Wu et al. 2020 §3-5: a collection of models on the same words
``finetuning``      Phang et al. 2021, Wu et al. §6, Merchant et al. §5: what fine-tuning changes
``truncation``      Phang et al. 2021 §4, Merchant et al. §5.2: how many layers a task needs
``domains``         Merchant et al. 2020 §6: in-domain against out-of-domain inputs

Every study names layers through :class:`analysis_lib.layers.LayerTable`.

The package imports nothing heavy itself; a chapter module brings in extraction and
training where it needs them. The attention and seeds chapters compute with the library's
general functions alone (:mod:`analysis_lib.collect`, :mod:`analysis_lib.similarity.attention`,
:mod:`analysis_lib.alignment.pairs`, :mod:`analysis_lib.claims.causes`).
"""
