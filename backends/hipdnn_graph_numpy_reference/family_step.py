"""One node of any family the reference declares (:data:`~.families.REFERENCE_FAMILY_OF`), as a
step of a NumPy reference plan.

What does not depend on the buffers is resolved when the plan is built: each slot's uid, the
values of compile-time constants, the data type and dims of each result. Executing the step
reads the inputs (read-only views, so that a runner can never write to one), calls the runner
and writes each result: into the caller's buffer for a graph output, or, for a virtual tensor a
later node reads, into a new array of the tensor's declared data type (so intermediates are
rounded as hipDNN's intermediate types say).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import ScalarSource, is_runtime_scalar
from hipdnn_graph.backend.dtypes import numpy_dtype

from .families import REFERENCE_TABLE, Runner, family_of
from .families._common import COMPUTE_DTYPES

__all__ = ["FamilyStep", "family_refusal"]


def family_refusal(node: Any) -> str | None:
    """Why the reference cannot run ``node`` (its family, compute type, a tensor's data type or
    the family's own check), or ``None``."""
    where = f"node '{node.name}'"
    family = REFERENCE_TABLE.find(node)
    if family is None:
        family_id = type(node).family_id
        what = f"custom family {family_id!r}" if family_id else node.get_node_type().name
        return f"{where}: {what} nodes have no NumPy reference"
    compute = hg.DataType(node.attributes.compute_data_type)
    if compute not in COMPUTE_DTYPES:
        return f"{where}: compute type {compute.name} (FLOAT or DOUBLE only)"
    for slot, tensor in node.attributes.tensors_by_slot().items():
        data_type = hg.DataType(tensor.data_type)
        try:
            dtype = numpy_dtype(data_type)
        except hg.HipdnnError:
            return f"{where}: {slot} '{tensor.name}' has data type {data_type.name} (no NumPy type)"
        if dtype.kind == "c":
            return f"{where}: {slot} '{tensor.name}' has complex data type {data_type.name}"
    return None if family.refusal is None else family.refusal(node)


def _read_only(array: Any) -> Any:
    if isinstance(array, np.ndarray) and array.flags.writeable:
        view = array.view()
        view.flags.writeable = False
        return view
    return array


@dataclass(frozen=True)
class FamilyStep:
    """A node and its runner, with every slot resolved to a uid."""

    name: str
    node: Any
    run: Runner
    #: (slot, uid) of the inputs read from the buffers as arrays
    arrays: tuple[tuple[str, int], ...]
    #: (slot, uid) of runtime pass-by-value scalars (Python numbers in the variant pack)
    runtime: tuple[tuple[str, int], ...]
    #: slot → value of compile-time constant scalars
    constants: Mapping[str, float]
    #: (slot, uid, storage dtype, dims) of every output
    results: tuple[tuple[str, int, np.dtype[Any], tuple[int, ...]], ...]

    @classmethod
    def of(cls, node: Any) -> FamilyStep:
        arrays: list[tuple[str, int]] = []
        runtime: list[tuple[str, int]] = []
        constants: dict[str, float] = {}
        for slot, tensor in node.attributes.inputs.items():
            if tensor.value is not None and not tensor.is_pass_by_value:
                constants[slot.name] = tensor.value
            elif is_runtime_scalar(tensor):
                runtime.append((slot.name, tensor.get_uid()))
            else:
                arrays.append((slot.name, tensor.get_uid()))
        results = tuple(
            (slot.name, t.get_uid(), numpy_dtype(t.data_type), tuple(t.dim))
            for slot, t in node.attributes.outputs.items()
        )
        return cls(
            name=node.name,
            node=node,
            run=family_of(node).run,
            arrays=tuple(arrays),
            runtime=tuple(runtime),
            constants=constants,
            results=results,
        )

    def inputs(self) -> set[int]:
        """The uids this node reads."""
        return {uid for _, uid in self.arrays + self.runtime}

    def outputs(self) -> set[int]:
        """The uids this node writes."""
        return {uid for _, uid, _, _ in self.results}

    def execute(self, buffers: dict[int, Any], internal: frozenset[int]) -> None:
        """Run the node on ``buffers`` (uid → array); results that are virtual tensors some
        later node reads (``internal``) are stored there in their declared data type.

        Raises:
            HipdnnError: ``GRAPH_EXECUTION_FAILED`` when the runner returned no array, or one
                of other dims, for an output; what the runner raises.
        """
        inputs: dict[str, Any] = dict(self.constants)
        for slot, uid in self.arrays:
            inputs[slot] = _read_only(buffers[uid])
        for slot, uid in self.runtime:
            inputs[slot] = ScalarSource.read(buffers[uid])
        values = self.run(self.node, inputs)
        for slot, uid, dtype, dims in self.results:
            value = values.get(slot)
            if value is None or tuple(np.shape(value)) != dims:
                got = "nothing" if value is None else f"dims {list(np.shape(value))}"
                raise hg.HipdnnError(
                    hg.ErrorCode.GRAPH_EXECUTION_FAILED,
                    f"node '{self.name}': the reference returned {got} for {slot}, whose dims "
                    f"are {list(dims)}",
                )
            out = buffers.get(uid)
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf to integers: C's cast
                if out is None:  # a virtual tensor: keep it, rounded, if a later node reads it
                    if uid in internal:
                        buffers[uid] = np.asarray(value).astype(dtype)
                else:
                    np.copyto(out, value, casting="unsafe")
