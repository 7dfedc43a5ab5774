"""The models one server serves, by kind and name, and how a request picks one."""

from __future__ import annotations

import dataclasses

from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.service import Service


@dataclasses.dataclass
class Registry:
    """Served models: `services[(kind, name)]`; a run may serve several kinds (an encoder's
    embeddings and fill-mask) under one name."""

    services: dict[tuple[str, str], Service] = dataclasses.field(default_factory=dict)

    def add(self, service: Service) -> None:
        key = (service.KIND, service.name)
        if key in self.services:
            raise ValueError(
                f"two workdirs serve a {service.KIND} model named {service.name!r}: "
                "give each a distinct name (--name) or folder name."
            )
        self.services[key] = service

    def of_kind(self, kind: str) -> list[Service]:
        return [s for (k, _), s in self.services.items() if k == kind]

    def names(self) -> list[str]:
        return sorted({name for _, name in self.services})

    def pick(self, kind: str, name: str | None) -> Service:
        """The `kind` model called `name`, or the only one when `name` is None.

        Raises:
          ApiError: 404 naming the models of that kind when there is no such one (or 400 when
            several could serve and the request names none).
        """
        served = self.of_kind(kind)
        listed = ", ".join(repr(s.name) for s in served) or "none"
        if name is None:
            if len(served) == 1:
                return served[0]
            if not served:
                raise ApiError(404, f"this server has no {kind} model.", param="model")
            raise ApiError(
                400, f"model is required: this server has {kind} models {listed}.", param="model"
            )
        if (kind, name) not in self.services:
            raise ApiError(
                404,
                f"no {kind} model named {name!r}; this server has: {listed} "
                "(GET /v1/models lists them).",
                param="model",
            )
        return self.services[(kind, name)]
