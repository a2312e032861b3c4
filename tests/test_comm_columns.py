"""communication.json is read a column at a time: values, missing fields and errors.

Expected values are worked out by hand from the crafted file below (ms → µs × 1000).
"""

import json

import pytest

from cann_diff.errors import SchemaError
from cann_diff.read.formats.json_files import read_communication


def op(elapse, transit=0.0, rdma_mb=None, hccs=None):
    links = {}
    if rdma_mb is not None:
        links["RDMA"] = {"Transit Size(MB)": rdma_mb, "Transit Time(ms)": 0.5}
    if hccs is not None:
        links["HCCS"] = hccs
    return {"Communication Time Info": {"Elapse Time(ms)": elapse, "Transit Time(ms)": transit},
            "Communication Bandwidth Info": links}


def write(tmp_path, data):
    path = tmp_path / "communication.json"
    path.write_text(json.dumps(data))
    return path


def test_columns_hold_each_op_in_microseconds(tmp_path):
    path = write(tmp_path, {
        "step3": {"collective": {"hcom_allReduce__1_0_1@g7": op(1.5, 0.25, rdma_mb=4.0),
                                 "Total Op Info": op(99.0)},
                  "p2p": {"hcom_send__2_0_1@g9": op("2", None, hccs={"Transit Size(MB)": "1.5"})}},
        "step4": {"collective": {"hcom_allReduce__1_1_1@g7": op(None)}},
    })
    frame = read_communication(path, rank=5)
    assert list(frame["op_name"]) == ["hcom_allReduce__1_0_1", "hcom_send__2_0_1",
                                      "hcom_allReduce__1_1_1"]
    assert list(frame["group"]) == ["g7", "g9", "g7"]
    assert list(frame["step"]) == [3, 3, 4]
    assert list(frame["rank"]) == [5, 5, 5]
    assert list(frame["elapse_us"]) == [1500.0, 2000.0, 0.0]  # "2" is a number, null is 0
    assert list(frame["transit_us"]) == [250.0, 0.0, 0.0]
    assert list(frame["rdma_mb"]) == [4.0, 0.0, 0.0]
    assert list(frame["rdma_us"]) == [500.0, 0.0, 0.0]
    assert list(frame["hccs_mb"]) == [0.0, 1.5, 0.0]
    assert list(frame["transit_mb"]) == [4.0, 0.0, 0.0]  # SDMA + RDMA; HCCS is inside SDMA
    assert list(frame["comm_type"]) == ["AllReduce", "Send", "AllReduce"]


def test_an_empty_file_gives_no_rows(tmp_path):
    frame = read_communication(write(tmp_path, {}), rank=0)
    assert len(frame) == 0 and "elapse_us" in frame


@pytest.mark.parametrize("bad, message", [
    (op("fast"), "hcom_allGather__3@g1: Elapse Time(ms) is not a number ('fast')"),
    (op(float("inf")), "hcom_allGather__3@g1: Elapse Time(ms) is inf, not a finite"),
    (op(float("nan")), "hcom_allGather__3@g1: Elapse Time(ms) is nan, not a finite"),  # not 0
    (op(1.0, rdma_mb=-2.0), "hcom_allGather__3@g1: RDMA is -2.0, not a finite"),
    (op(1.0, hccs=[1, 2]), "hcom_allGather__3@g1: HCCS bandwidth info must be an object"),
])
def test_the_first_wrong_value_is_named_with_its_op(tmp_path, bad, message):
    path = write(tmp_path, {"step1": {"collective": {"hcom_allReduce__1@g1": op(1.0),
                                                     "hcom_allGather__3@g1": bad}}})
    with pytest.raises(SchemaError) as caught:
        read_communication(path, rank=0)
    assert message in str(caught.value)


def test_each_op_gets_its_name_s_type_whatever_its_digits():
    import pandas as pd

    from cann_diff.read.formats.json_files import comm_types_of

    # Every op's name carries its own indices; the type is the name's without them. An
    # Arabic-Indic digit (U+0663) is a digit too, as the name rules read it.
    names = pd.Series(["hcom_allReduce__586_0_1", "hcom_allGather__\u0663_2",
                       "hcom_broadcast_7", "hcom_allReduce__1_12_1", "hcom_allReduce_"],
                      dtype=object)
    assert list(comm_types_of(names)) == ["AllReduce", "AllGather", "Broadcast", "AllReduce",
                                          "AllReduce"]
    assert list(comm_types_of(pd.Series([], dtype=object))) == []
