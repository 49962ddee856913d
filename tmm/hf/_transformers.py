"""transformers, imported only where a HF config is read: an optional dependency."""


def require_transformers(what):
    try:
        import transformers
    except ImportError as e:
        raise ImportError(
            f"{what} needs the HuggingFace transformers package (pip install transformers, or tmm's extra: tmm[hf]), "
            f"which is not installed: {e}"
        ) from None
    return transformers
