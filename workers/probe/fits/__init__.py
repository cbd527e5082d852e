"""The probe fits: linear and MLP target models trained on frozen features, k folds at once,
and the FLOPs they cost. Pure computation on arrays (torch and numpy), no storage."""
