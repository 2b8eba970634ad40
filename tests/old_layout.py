"""Rewrite a freshly saved model file into the layout of an earlier dubito version (for the
"old files still load" tests): y_mean / y_scale back into the JSON settings (before the one
estimator base), and the tensors / fitted keys that version did not write dropped."""

from dubito import io


def rewrite_as_older(path, cls_name: str, *, drop_tensors=(), drop_fitted=()) -> None:
    tensors, settings = io.load_tensors(path, cls_name)
    fitted = settings["fitted"]
    for name in ("y_mean", "y_scale"):
        fitted[name] = float(tensors.pop(name))
    for name in drop_tensors:
        del tensors[name]
    for name in drop_fitted:
        del fitted[name]
    io.save_tensors(path, tensors, cls_name, settings)
