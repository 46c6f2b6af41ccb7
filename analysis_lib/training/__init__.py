"""Training: one loop for every objective, model surgery, fine-tuning and probes.

``loop``      the one training loop (AdamW, warmup and decay, frozen parameters, progress)
``pretrain``  small language models pretrained from scratch (the model zoo's recipes)
``zoo``       the model zoo's sets trained side by side into the cache
``surgery``   freezing layers, truncating and skipping layers (one layer-index convention)
``finetune``  task models, settings and presets, the fine-tuning cache, predict / evaluate
``heads``     a task model's own head on one layer's first-token vectors, and its re-fitting
``probes``    the book's one logistic-regression probe, and it fitted on one layer
"""
