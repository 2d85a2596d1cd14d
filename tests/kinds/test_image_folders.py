"""pipeline/kinds/image_folders.py: its preprocess section, its templates and its samples."""

import dataclasses

from pipeline.kinds import image_folders


def test_both_readers_take_one_section_and_its_templates_are_the_small_pictures_then_photos():
    kind = image_folders.KIND
    assert {r.preprocess for r in kind.readers.values()} == {image_folders.ImageFoldersPreprocessConfig}
    assert kind.templates == (image_folders.SMALL, image_folders.PHOTOS) == ("image_folders", "photos")
    assert kind.pictures and kind.dtype == "uint8" and kind.form == "images"


def test_its_section_pins_what_the_pictures_hold():
    fields = {f.name: f for f in dataclasses.fields(image_folders.ImageFoldersPreprocessConfig)}
    check = fields["images_sha256"].metadata["check"]
    assert check("a" * 64) and not check("a" * 63)
