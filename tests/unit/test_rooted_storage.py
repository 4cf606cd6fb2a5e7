"""The rooted file system: the one place that refuses paths outside the roots a piece of work may touch."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.formats.paths import canonical_uri, is_plain_local, parse_uri
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem


def tree_digest(root: Path) -> dict[str, str]:
    """Every file below ``root`` (links not followed) by path, with its content hash."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path, RootedFileSystem]:
    root, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    (root / "t").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.json").write_bytes(b'{"secret": 1}')
    (root / "t" / "f").write_bytes(b"data")
    return root, outside, RootedFileSystem([str(root)], purpose="test work")


def test_paths_below_the_root_are_served_in_every_spelling(layout) -> None:
    root, _, fs = layout
    for uri in (f"{root}/t/f", f"file:{root}/t/f", f"file://{root}/t/f", f"file://localhost{root}/t/f"):
        assert fs.exists(uri)
        assert fs.checksum(uri) == checksum_bytes(b"data")
    fs.write_bytes(f"{root}/t/new/g", b"x")  # a path that does not exist yet is checked by its parents
    assert (root / "t" / "new" / "g").read_bytes() == b"x"


@pytest.mark.parametrize(
    "relative",
    [
        "../elsewhere/secret.json",  # a '..' segment is refused, never resolved
        "t/../../elsewhere/secret.json",
        "t/./f",
        "t//f",
    ],
)
def test_dot_segments_are_refused_before_any_io(layout, relative: str) -> None:
    root, outside, fs = layout
    before = tree_digest(outside.parent)
    with pytest.raises(OutsideRootsError, match="test work: refused"):
        fs.delete(f"{root}/{relative}")
    with pytest.raises(OutsideRootsError):
        fs.write_bytes(f"{root}/{relative}", b"overwritten")
    assert tree_digest(outside.parent) == before


def test_paths_outside_every_root_are_refused_with_one_error(layout) -> None:
    root, outside, fs = layout
    before = tree_digest(outside)
    target = f"{outside}/secret.json"
    operations = [
        lambda: fs.open_read(target),
        lambda: fs.checksum(target),
        lambda: list(fs.list_files(str(outside))),
        lambda: fs.write_bytes(target, b"overwritten"),
        lambda: fs.delete(target),
        lambda: fs.delete_tree(str(outside)),
        lambda: fs.move(f"{root}/t/f", f"{outside}/moved"),
        lambda: fs.move(target, f"{root}/t/stolen"),
        lambda: fs.copy(target, f"{root}/t/stolen"),
        lambda: fs.link(target, f"{root}/t/stolen"),
        lambda: fs.rename(target, f"{root}/t/stolen"),
        lambda: fs.touch(target, 0),
        lambda: fs.remove_empty_directory(str(outside)),
        lambda: fs.makedirs(f"{outside}/new"),
        lambda: fs.make_directory(f"{outside}/new"),
    ]
    for operation in operations:
        with pytest.raises(OutsideRootsError, match="outside the roots it may touch"):
            operation()
    assert tree_digest(outside) == before
    assert not (root / "t" / "stolen").exists() and (root / "t" / "f").exists()


def test_make_directory_says_whether_it_made_the_directory(layout) -> None:
    """A load lists a version directory only when an earlier attempt left it: the answer decides that."""
    root, _, fs = layout
    assert fs.make_directory(f"{root}/t/p=1.hmsrepl-v7") is True  # its parent exists: one mkdir
    assert fs.make_directory(f"{root}/t/p=1.hmsrepl-v7") is False  # left by an earlier attempt
    assert fs.make_directory(f"{root}/new/a/b") is True  # missing parents are made too
    assert (root / "new" / "a" / "b").is_dir()
    os.symlink(root / "new", root / "t" / "inside")  # a link to a directory in the root is one
    assert fs.make_directory(f"{root}/t/inside") is False
    with pytest.raises(FileExistsError):  # a file in the way is an error, as for makedirs
        fs.make_directory(f"{root}/t/f")
    with pytest.raises(FileExistsError):
        fs.makedirs(f"{root}/t/f")
    assert (root / "t" / "f").read_bytes() == b"data"


def test_a_sibling_with_the_root_as_name_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "wx").mkdir()
    fs = RootedFileSystem([str(tmp_path / "w")], purpose="test work")
    with pytest.raises(OutsideRootsError):
        fs.write_bytes(str(tmp_path / "wx" / "f"), b"x")
    assert not (tmp_path / "wx" / "f").exists()


def test_symlinks_are_resolved_for_containment(layout) -> None:
    root, outside, fs = layout
    os.symlink(outside / "secret.json", root / "t" / "link")
    os.symlink(outside, root / "t" / "dirlink")
    before = tree_digest(outside)
    with pytest.raises(OutsideRootsError, match="resolves to"):
        fs.open_read(f"{root}/t/link")  # reading through the link would leave the root
    with pytest.raises(OutsideRootsError):
        fs.write_bytes(f"{root}/t/dirlink/secret.json", b"overwritten")  # a parent that leads out
    with pytest.raises(OutsideRootsError):
        fs.delete(f"{root}/t/dirlink/secret.json")
    with pytest.raises(OutsideRootsError):
        fs.make_directory(f"{root}/t/dirlink/made")  # a directory made through a link out
    for name in ("dirlink", "link"):  # already there, as a link out: refused, not taken for made or a file
        with pytest.raises(OutsideRootsError, match="resolves to"):
            fs.make_directory(f"{root}/t/{name}")
    assert tree_digest(outside) == before and not (outside / "made").exists()
    fs.delete(f"{root}/t/link")  # the link itself lies in the root: removing it touches nothing outside
    assert not os.path.lexists(root / "t" / "link")
    assert tree_digest(outside) == before
    os.symlink(root / "t" / "f", outside / "inward")  # a name outside that leads into the root
    for operation in (fs.delete, fs.open_read, fs.admit):
        with pytest.raises(OutsideRootsError):
            operation(f"{outside}/inward")
    assert os.path.lexists(outside / "inward") and (root / "t" / "f").exists()


def test_admitted_paths_are_checked_once_and_others_still_every_time(layout) -> None:
    root, outside, fs = layout
    admitted = fs.admit(f"{root}/t/f")
    assert admitted.checksum(f"{root}/t/f") == checksum_bytes(b"data")
    admitted.sync_directory(f"{root}/t")  # its directory passed with it
    with pytest.raises(OutsideRootsError):
        admitted.delete(f"{outside}/secret.json")
    assert (outside / "secret.json").exists()


def test_object_store_roots_compare_canonical_keys_without_io() -> None:
    fs = RootedFileSystem(["s3a://bucket/warehouse"], purpose="test work")
    assert fs.check("s3://bucket/warehouse/t/f") == "s3://bucket/warehouse/t/f"
    assert fs.contains("s3n://bucket/warehouse/t")
    for uri in ("s3://bucket/warehouse2/f", "s3://other/warehouse/f", "s3://bucket/warehouse/../x", "/w/f"):
        assert not fs.contains(uri), uri


def test_a_change_manager_touches_nothing_outside_its_roots(tmp_path: Path) -> None:
    """An event naming a file outside the data roots (a crafted or stale entry) is refused, not recycled."""
    warehouse, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    warehouse.mkdir()
    outside.mkdir()
    secret = outside / "conf.json"
    secret.write_bytes(b"secret")
    cm = ChangeManager(str(tmp_path / "cmroot"), roots=[str(warehouse)])
    before = tree_digest(tmp_path)
    for action in (cm.recycle, cm.pin, cm.preserve):
        with pytest.raises(OutsideRootsError):
            action([cm.encode(str(secret), checksum_bytes(b"secret"))])
    assert tree_digest(tmp_path) == before
    assert not (tmp_path / "cmroot").exists()


def test_a_batch_resolves_each_directory_once_and_still_refuses_a_link_out(tmp_path: Path) -> None:
    """Recycling a dropped table resolves its directories once for the batch, not once per file; a
    partition directory that is a symlink leading out is still refused, next to plain ones admitted."""
    warehouse, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    table = warehouse / "db" / "t"
    for n in range(3):
        (table / f"p={n}").mkdir(parents=True)
        (table / f"p={n}" / "f").write_bytes(b"data")
    outside.mkdir()
    (outside / "f").write_bytes(b"secret")
    os.symlink(outside, table / "p=out")
    os.symlink(table / "p=0", table / "p=in")  # a link that stays inside the root
    fs = RootedFileSystem([str(warehouse)], purpose="test work")
    batch = fs.batch()
    for n in range(3):
        assert batch.admit(f"{table}/p={n}/f").checksum(f"{table}/p={n}/f") == checksum_bytes(b"data")
    assert batch.check(f"{table}/p=in/f") == f"{table}/p=in/f"
    assert batch.check(f"{table}/p=9/new") == f"{table}/p=9/new"  # a missing directory: its parent decides
    with pytest.raises(OutsideRootsError, match="resolves to"):
        batch.admit(f"{table}/p=out/f")
    with pytest.raises(OutsideRootsError):
        batch.admit(f"{table}/p=0/../../../../elsewhere/f")
    assert (outside / "f").read_bytes() == b"secret"
    for path in (f"{table}/p=1", f"{table}/p=in", f"{table}/p=out", f"{table}/p=9", str(table)):
        assert batch._real_directory(path) == os.path.realpath(path)  # what realpath says, every time
    assert fs._directories is None and fs.batch()._directories == {}  # nothing kept beyond the batch


@pytest.mark.parametrize(
    "uri",
    [
        "/r/db/t/p=a/part-0",
        "file:/r/db/t/p=a/part-0",
        "file:///r/db/t/p=a/part-0",
        "file://localhost/r/db/t/p=a/part-0",
        "/r/db/t/p=a/..",
        "/r/db/t/p=a/.",
        "/r/db/t//part-0",
        "/r/db/t/p=a/part\x01",
        "/r/db/t/p=a/%2E%2E",
        "/r/db/../t/part-0",
        "s3a://bucket/wh/t/part-0",
        "s3://v1@bucket/wh/t/part-0",
        "s3://bucket/part-0",
        "hdfs://NN:8020/wh/t/part-0",
        "file://otherhost/r/part-0",
        "relative/part-0",
        "/part-0",
    ],
)
def test_a_batch_spells_every_path_as_a_full_parse_does(uri: str) -> None:
    """A batch canonicalises a file from its directory's known form (a million files of one partition are
    one parse): same answer, same refusal, for every spelling, before and after its directory was seen."""
    fs = RootedFileSystem(["/r", "s3://bucket/wh", "hdfs://nn:8020/wh"], purpose="test work")
    batch = fs.batch()

    def answer(rooted: RootedFileSystem, path: str) -> str:
        try:
            return rooted._canonical(path)
        except OutsideRootsError as exc:
            return f"refused: {exc}"

    parent = uri.rpartition("/")[0]
    for path in (uri, parent, uri, parent + "/second"):
        assert answer(batch, path) == answer(fs, path)


def test_a_change_manager_recycles_a_tree_and_refuses_its_link_out(tmp_path: Path) -> None:
    warehouse, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    table = warehouse / "t"
    (table / "p=1").mkdir(parents=True)
    (table / "p=1" / "f").write_bytes(b"data")
    outside.mkdir()
    (outside / "f").write_bytes(b"secret")
    os.symlink(outside, table / "p=out")
    cm = ChangeManager(str(tmp_path / "cmroot"), roots=[str(warehouse)])
    cm.recycle([cm.encode(f"{table}/p=1/f", checksum_bytes(b"data"))])
    assert not (table / "p=1" / "f").exists()
    assert (tmp_path / "cmroot" / f"f_{checksum_bytes(b'data')}").read_bytes() == b"data"
    before = tree_digest(outside)
    with pytest.raises(OutsideRootsError):
        cm.recycle([cm.encode(f"{table}/p=out/f", checksum_bytes(b"secret"))])
    assert tree_digest(outside) == before


_PATHLIKE = st.text(
    alphabet=st.sampled_from(["/", ".", "a", "@", ":", "%", " ", "\x00", "\x1f", "\x7f", "é", "\u2028"])
)


@given(st.one_of(_PATHLIKE, _PATHLIKE.map(lambda text: "/" + text), st.text()))
@settings(max_examples=3000, deadline=None)
def test_a_path_taken_as_canonical_without_parsing_is_what_the_parser_returns(uri: str) -> None:
    """The shortcut for plain local paths (``canonical_uri``'s and the rooted checks') never lets through a
    spelling the parser would change or refuse (a ``..`` segment, a control character, a doubled or trailing
    slash, a path over the limit)."""
    for limit in (4096, 8):
        if is_plain_local(uri, limit):
            assert parse_uri(uri, max_chars=limit) == ("file", "", uri)
            assert canonical_uri(uri, limit) == uri


def test_the_shortcut_takes_the_common_paths_and_leaves_the_rest_to_the_parser() -> None:
    assert is_plain_local("/warehouse/db.db/t/d=1/part-0000.parquet")
    assert not is_plain_local("/warehouse/t", max_chars=8)
    for uri in (
        "/w/../etc",
        "/w/./t",
        "/w//t",
        "/w/t/",
        "/w/t\x00",
        "file:/w/t",
        "/",
        "/w/.hidden",
        "/" + "a" * 4096,
    ):
        assert not is_plain_local(uri)


def partition_beside_a_secret(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(warehouse, a directory outside it holding ``secret``, a partition holding ``f`` and ``link-out``, a
    symlink to the secret)."""
    warehouse, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    part = warehouse / "t" / "p=a"
    part.mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    (part / "f").write_bytes(b"data")
    os.symlink(outside / "secret", part / "link-out")
    return warehouse, outside, part


def test_a_batch_refuses_and_admits_every_name_as_a_single_check_does(tmp_path: Path) -> None:
    """A batch compares each real directory with the roots once, not each name in it: every name still gets
    the answer of a check of its own, whether its directory was seen before or not (a symlink leading out,
    ``..``, a root that is itself a name in a directory outside the roots, a dangling link)."""
    warehouse, outside, part = partition_beside_a_secret(tmp_path)
    side = tmp_path / "side"
    side.mkdir()
    (side / "root-file").write_bytes(b"a root of its own")
    os.symlink(part / "f", part / "link-in")
    os.symlink(outside / "gone", part / "dangling-out")
    os.symlink(outside, warehouse / "t" / "p=out")
    fs = RootedFileSystem([str(warehouse), str(side / "root-file")], purpose="test work")
    names = [
        f"{part}/f",
        f"{part}/new",
        f"{part}/link-out",
        f"{part}/link-in",
        f"{part}/dangling-out",
        f"{part}/../../../elsewhere/secret",
        f"{warehouse}/t/p=out/secret",
        f"{warehouse}/t/p=out/new",
        f"{side}/root-file",
        f"{side}/other",
        f"{outside}/secret",
    ]

    def answer(rooted: RootedFileSystem, uri: str, follow: bool) -> str:
        try:
            return rooted.check(uri, follow=follow)
        except OutsideRootsError as exc:
            return f"refused: {exc}"

    for order in (names, names[::-1]):
        batch = fs.batch()
        for follow in (True, False):
            for uri in order * 2:  # its directory unseen, then seen
                assert answer(batch, uri, follow) == answer(fs, uri, follow), (uri, follow)
    refused = [uri for uri in names if answer(fs.batch(), uri, True).startswith("refused")]
    assert refused == [
        f"{part}/link-out",
        f"{part}/dangling-out",
        f"{part}/../../../elsewhere/secret",
        f"{warehouse}/t/p=out/secret",
        f"{warehouse}/t/p=out/new",
        f"{side}/other",
        f"{outside}/secret",
    ]


def test_a_pin_refuses_a_link_out_as_its_file_or_as_its_cmroot_name(tmp_path: Path) -> None:
    """Pinning admits a cmroot name as a name (it is linked, not read): a name there already that leads out
    of the roots is still refused before anything is written, as is a file to pin that is such a link."""
    warehouse, outside, part = partition_beside_a_secret(tmp_path)
    cmroot = tmp_path / "cmroot"
    cmroot.mkdir()
    cm = ChangeManager(str(cmroot), roots=[str(warehouse)])
    data, secret = checksum_bytes(b"data"), checksum_bytes(b"secret")
    before = tree_digest(tmp_path)
    with pytest.raises(OutsideRootsError, match="resolves to"):
        cm.pin([cm.encode(f"{part}/link-out", secret)])
    os.symlink(outside / "secret", cmroot / f"f_{data}")  # a cmroot name planted to lead out
    with pytest.raises(OutsideRootsError, match="resolves to"):
        cm.pin([cm.encode(f"{part}/f", data)])
    assert tree_digest(tmp_path) == before
    assert sorted(os.listdir(cmroot)) == [f"f_{data}"] and os.path.islink(cmroot / f"f_{data}")
    os.unlink(cmroot / f"f_{data}")
    assert cm.pin([cm.encode(f"{part}/f", data)]) == 1
    assert os.path.samefile(cmroot / f"f_{data}", part / "f")
