"""tests/runner/images.py's Builder, the thread that makes the container tests' engine and images
while the other tests run: when the session ends, what it waits for before it stops the engine.
Its engine script is a stand-in here that writes down each call (tests/scenarios/test_container.py
runs the real one)."""

import os
import threading
import time

from runner import images


def builder_with_engine_log(tmp_path, monkeypatch, make):
    """A Builder whose thread runs `make(builder, log)` and whose engine.sh only appends its
    arguments to `log`."""
    here = tmp_path / "container"
    here.mkdir()
    log = tmp_path / "engine.log"
    (here / "engine.sh").write_text(f'echo "$@" >> {log}\n')
    monkeypatch.setattr(images, "HERE", here)
    builder = images.Builder(tmp_path / "made.json")
    builder.thread = threading.Thread(target=make, args=(builder, log), daemon=True)
    builder.start()
    return builder, log


def test_a_session_that_ends_before_the_images_are_made_stops_the_engine_at_once(tmp_path, monkeypatch):
    def building(builder, log):  # a build that lasts until the engine stops under it
        while not log.exists():
            time.sleep(0.05)

    builder, log = builder_with_engine_log(tmp_path, monkeypatch, building)
    started = time.monotonic()
    builder.finish()
    assert time.monotonic() - started < 60  # not the 30 minutes a whole build may take
    assert log.read_text().split() == ["stop", str(builder.state)]
    assert not builder.thread.is_alive() and not builder.state.exists()


def test_once_the_images_are_made_the_engine_stops_after_the_thread_kept_them(tmp_path, monkeypatch):
    def made_then_kept(builder, log):
        builder.made = {"seconds": 1.0}
        time.sleep(1)  # saving what later runs reuse
        log.write_text("kept\n")

    builder, log = builder_with_engine_log(tmp_path, monkeypatch, made_then_kept)
    while builder.made is None:
        time.sleep(0.05)
    builder.finish()
    assert log.read_text().split() == ["kept", "stop", str(builder.state)]
    assert not builder.state.exists()


def test_one_session_at_a_time_has_the_engine_that_keeps_its_images(tmp_path, monkeypatch):
    """The kept engine's folder goes to the first session that asks; another session at the same
    moment starts an engine of its own (and loads the saves); once the first has finished, the
    next one has it, and the first's engine stopped with that folder named."""
    monkeypatch.setattr(images, "STANDIN_CACHE", tmp_path)
    monkeypatch.setattr(images, "KEPT_ROOT", tmp_path / "engine")
    first, log = builder_with_engine_log(tmp_path, monkeypatch, lambda builder, log: None)
    first.root = first._claim()
    assert first.root == tmp_path / "engine"
    second = images.Builder(tmp_path / "b.json")
    assert second._claim() is None
    first.finish()  # no engine ran: nothing to tidy
    assert log.read_text().split() == ["stop", str(first.state), str(tmp_path / "engine")]
    third = images.Builder(tmp_path / "c.json")
    assert third._claim() == tmp_path / "engine"
    os.close(third.lock)
    for builder in (second, third):  # no engine ran in their folders (/var/tmp): left empty
        builder.state.rmdir()
