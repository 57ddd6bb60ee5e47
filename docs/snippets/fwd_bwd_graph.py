"""The forward→backward graph drawn in the docs (Concepts → "A picture of the graph").

Run ``python docs/snippets/fwd_bwd_graph.py > docs/diagrams/fwd_bwd.mmd`` to regenerate the
committed diagram; tests/test_docs.py checks that the two agree.
"""

import hipdnn_graph as hg


def build_graph() -> hg.Graph:
    g = hg.Graph(
        name="attention",
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[2, 8, 1024, 64])
    k = g.tensor(name="K", dim=[2, 2, 1024, 64])  # grouped-query attention: 2 K/V heads
    v = g.tensor(name="V", dim=[2, 2, 1024, 64])
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
    do = g.tensor(name="dO", dim=[2, 8, 1024, 64])
    assert stats is not None
    o.set_output(True)  # O is returned and also feeds the backward; Stats stays virtual
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
    for grad in (dq, dk, dv):
        grad.set_output(True)
    g.build_operation_graph()  # validate, then assign uids
    return g


if __name__ == "__main__":
    print(build_graph().to_mermaid(), end="")
