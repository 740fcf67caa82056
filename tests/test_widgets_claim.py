"""Chapter 10's claim explainer panel: a claim typed into its controls gets the theory's verdict."""

from goodputlab.theory import claim as model
from goodputlab.widgets import ClaimPanel


def test_the_panel_explains_the_claim_its_controls_state():
    panel = ClaimPanel()
    assert panel.claim is not None and panel.claim.lever == "memory"
    assert "implausible" in panel.headline.value and "storage bandwidth" in panel.table.value
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
