"""nxgates list, show and --version."""

from nxgates import __version__


def test_list_show_version(invoke):
    r = invoke("list")
    assert r.exit_code == 0 and "lora" in r.stdout and "lora-gradcheck" in r.stdout
    r = invoke("show", "lora-gradcheck")
    assert r.exit_code == 0
    for text in ("delta", "2097", "int in [1,", "presets", "large", "base W frozen", "grad-bug"):
        assert text in r.stdout
    r = invoke("--version")
    assert r.exit_code == 0 and __version__ in r.stdout
