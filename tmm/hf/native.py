"""TMM and Hyena in the HF directory layout: config.json names the
architecture (``"architectures": ["TMMForCausalLM"], "model_type": "tmm"``)
and holds tmm's own config beside it; model.safetensors holds tmm's tensor
names. transformers has no such classes: tmm.hf.from_pretrained reads them."""
from ._errors import unsupported

ARCHITECTURES = {"tmm": "TMMForCausalLM", "hyena": "HyenaForCausalLM"}
HF_KEYS = ("architectures", "model_type", "tmm_version", "transformers_version")


def hf_config(config, version):
    """config.json's content for a tmm config of arch tmm or hyena."""
    arch = config["arch"]
    return {"architectures": [ARCHITECTURES[arch]], "model_type": arch, "tmm_version": version, **config}


def tmm_config(raw, where):
    """tmm's config out of such a config.json: the HF keys removed, the
    architecture, model_type and arch checked to agree."""
    model_type = raw.get("model_type")
    config = {k: v for k, v in raw.items() if k not in HF_KEYS}
    if config.get("arch", model_type) != model_type:
        unsupported(where, "arch", config.get("arch"), f'"{model_type}" (its model_type)')
    architectures = raw.get("architectures") or [ARCHITECTURES[model_type]]
    if architectures != [ARCHITECTURES[model_type]]:
        unsupported(where, "architectures", architectures, f'["{ARCHITECTURES[model_type]}"]')
    config["arch"] = model_type
    return config
