"""Chapter 10's claim explainer panel: a claim typed into its controls gets the theory's verdict."""

from goodputlab.theory import claim as model
from goodputlab.widgets import ClaimPanel


def test_the_panel_explains_the_claim_its_controls_state():
    panel = ClaimPanel()
    assert panel.claim is not None and panel.claim.lever == "memory"
    # a 42 s synchronous save before: within the published saves, the slowest to the fastest
    assert ">plausible<" in panel.headline.value and "storage bandwidth" in panel.table.value
    assert "70B parameters" in panel.headline.value and "RAM copy of each checkpoint on a peer" in panel.table.value
    assert "ETTR before" in panel.table.value
    assert any("<summary>goodput and ETTR</summary>" in getattr(w, "value", "") for w in panel.widget.children)
    panel.lever.value, panel.before.value, panel.after.value, panel.gpus.value = "restart", 85.0, 93.0, 16_384
    claim = panel.explain()
    assert claim.to_dict() == model.explain("restart", 0.85, 0.93, 16_384).to_dict()
    assert ">plausible<" in panel.headline.value and "restart after" in panel.table.value
    # a change of a control redraws by itself (the observer calls explain)
    panel.gpus.value = 1000
    assert panel.claim.gpus == 1000


def test_a_claim_that_cannot_be_read_says_why_without_raising():
    panel = ClaimPanel()
    panel.after.value = 50.0  # below the 85% before
    assert panel.explain() is None and panel.claim is None
    assert "cannot be read" in panel.headline.value and "after" in panel.headline.value
    panel.after.value = 99.0
    assert panel.claim is not None


def test_the_hot_spare_claim_of_the_chapter_is_implausible_for_its_restart():
    panel = ClaimPanel(lever="hot-spare", before=50.0, after=99.0, gpus=1000)
    assert not panel.claim.plausible
    assert "cold restart before the spares" in panel.table.value and "implausible" in panel.headline.value


def test_pins_reach_the_model_and_a_bad_pin_says_why():
    panel = ClaimPanel()
    panel.pins["storage_gbps"].value = "1000"
    claim = panel.explain()
    assert claim.to_dict() == model.explain("memory", 0.85, 0.95, 8192, pins=model.Pins(storage_gbps=1000)).to_dict()
    assert ">implausible<" in panel.headline.value and "contradict" in panel.table.value
    panel.pins["storage_gbps"].value = "fast"
    assert panel.explain() is None and "cannot be read" in panel.headline.value
    panel.pins["storage_gbps"].value = ""
    assert panel.explain() is not None and panel.claim.pinned == {}
