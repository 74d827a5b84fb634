"""Label-free per-layer signals that read a task's own pooled vectors: agreement with a reference sentence encoder
(:mod:`.measures`: mutual k-NN, linear CKA; :mod:`.reference`), TwoNN intrinsic dimension and its layer rules
(:mod:`.intrinsic_dimension`), computed for a scored run (:mod:`.run`) into ``agreement.csv`` (:mod:`.table`)."""
