"""Label-free per-layer curves that read a task's own pooled vectors: agreement with a reference sentence encoder
(:mod:`.measures`: mutual k-NN, linear CKA; :mod:`.reference`, :mod:`.lexical`), TwoNN intrinsic dimension and its
selectors (:mod:`.intrinsic_dimension`), computed for a scored run into ``agreement.csv`` (:mod:`.compute`)."""
