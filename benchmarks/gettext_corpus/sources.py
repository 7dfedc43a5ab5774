"""The pinned packages whose Spanish gettext catalogs make the corpus: one table, read by
download.py (what to fetch and its checksum) and build.py (what to read, how, which split).

The pins are the newest versions in 2026-11. Each row's `catalogs` picks the catalogs of
Spanish as such (`es`, or indico's `es_ES`), where the project keeps them (gnuhealth: Tryton's
`locale/es.po`); regional variants (`es_AR`, `es_MX`, ...) are left out, so the target side is
one variety and the same English strings are not taken again in other words. A pair that also
occurs in an earlier row of its split is credited to that row. Test and validation: three
mid-sized projects, two kinds of user interface (Spyder, a Qt desktop application; Horizon and
Django's admin, web applications).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from benchmarks.gettext_corpus import clean

SPLITS = ("train", "valid", "test")
REGISTRIES = ("pypi", "debian")


@dataclasses.dataclass(frozen=True)
class Source:
    """One pinned package and what to take from it.

    Attributes:
      name: the package's name in its registry.
      version: the exact version (Debian's with its epoch).
      registry: "pypi" (a wheel) or "debian".
      file: the file's name in the cache.
      sha256: the file's checksum: a registry serving other bytes is an error.
      licence: the package's licence (SPDX where one fits), which its translations share.
      catalogs: a regular expression matching the member paths of its Spanish catalogs.
      accelerators: its accelerator mark characters ("" for web applications).
      split: which split all of its pairs go to.
    """

    name: str
    version: str
    registry: str
    file: str
    sha256: str
    licence: str
    catalogs: str
    accelerators: str
    split: str


# fmt: off
SOURCES = (
    Source("libreoffice-l10n-es", "4:7.4.7-1+deb12u14", "debian",
           "libreoffice-l10n-es_7.4.7-1+deb12u14_all.deb",
           "ec8c42bbef9a1d6053cb32380739fa7551968708205a629a91e82484865d9822", "MPL-2.0",
           r"/resource/es/LC_MESSAGES/[^/]+\.mo$", "~_", "train"),
    Source("gramps", "6.0.8", "pypi", "gramps-6.0.8-py3-none-any.whl",
           "56f03bcb643320eb9f9892d4c3f8bbe7c4c4d2e4c71e56f598584af24561ec1c",
           "GPL-2.0-or-later", r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "_", "train"),
    Source("pretix", "2026.8.0", "pypi", "pretix-2026.8.0-py3-none-any.whl",
           "a78932e698778d873530d67f25a57c28d1c09b1bfb1a22ec817c00d90397db85",
           "AGPL-3.0 with pretix's additional terms", r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$",
           "", "train"),
    Source("indico", "3.2.9", "pypi", "indico-3.2.9-py3-none-any.whl",
           "194d2e31ccaabd2b9af7809e67d60d942faee35a6b4de36f0c2c280a32ed84c3", "MIT",
           r"/es_ES/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("gnuhealth", "5.0.6", "pypi", "gnuhealth-5.0.6-py3-none-any.whl",
           "cee9ae54c85afd93ba024f1102b978040062b5d3df26090270453cbd6eb5fe62",
           "GPL-3.0-or-later", r"/locale/es\.po$", "", "train"),
    Source("sphinx", "9.0.4", "pypi", "sphinx-9.0.4-py3-none-any.whl",
           "5bebc595a5e943ea248b99c13814c1c5e10b3ece718976824ffa7959ff95fffb", "BSD-2-Clause",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("weblate", "2026.10.1", "pypi", "weblate-2026.10.1-py3-none-any.whl",
           "27a779ceb05fec3665081df0d3f46f4b6ac0e3f499160a1c3cb145e8e35853d2",
           "GPL-3.0-or-later", r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("plone.app.locales", "7.0.4", "pypi", "plone_app_locales-7.0.4-py3-none-any.whl",
           "de96a5d0dc1fe5ab540fa6f993805c09da80a9518aa7a309e8cd1f433e3ae6aa", "GPL-2.0-only",
           r"/locales/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("wagtail", "8.0.1", "pypi", "wagtail-8.0.1-py3-none-any.whl",
           "1e6ad5c7891a54efce1400e168298b5a2cc343b642cee89c31bf5ec30c98b26c", "BSD-3-Clause",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("ckan", "2.12.0", "pypi", "ckan-2.12.0-py3-none-any.whl",
           "3b41cb4860286813fbcd18c57341e96edba266e2e492aeea92c4e03ce9e2934e",
           "AGPL-3.0-or-later", r"/i18n/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("Trac", "1.6", "pypi", "Trac-1.6-py3-none-any.whl",
           "5ff2f3394ebee7cc5b8ee465871cfdecb78ee492a74215b47b6d9ddbcc93b5f7", "BSD-3-Clause",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("deluge", "2.2.0", "pypi", "deluge-2.2.0-py3-none-any.whl",
           "5ac4ce734d92a1a0c36a3b89db447967175a986c06e84ec9cc61ca73e88bf0b5",
           "GPL-3.0-or-later", r"/i18n/es/LC_MESSAGES/[^/]+\.(po|mo)$", "_", "train"),
    Source("postorius", "1.3.13", "pypi", "postorius-1.3.13-py3-none-any.whl",
           "a13f3b6856cf8f0f454efbf7d642d06912867e8f0befb98a43cd604e04532ffe", "GPL-3.0",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("gaphor", "3.3.2", "pypi", "gaphor-3.3.2-py3-none-any.whl",
           "6a8a84bbce429677af664c9857d9433ea66e782015d7a53f679f7e7c4bf208d0", "Apache-2.0",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "_", "train"),
    Source("django-cms", "5.1.3", "pypi", "django_cms-5.1.3-py3-none-any.whl",
           "acf31919aab389d2bea253efa97a901bf55e96046a252f23a7a742e495848a5e", "BSD-3-Clause",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("hyperkitty", "1.3.12", "pypi", "hyperkitty-1.3.12-py3-none-any.whl",
           "4205862e1d323e972bcb7447f1962da925709c7be43e663ffdc7bc7fa51e514d", "GPL-3.0",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "train"),
    Source("django", "5.2.19", "pypi", "django-5.2.19-py3-none-any.whl",
           "5965d974a5218a2b68a11dd1276434707f23886525c23f0598eccedaf4f4ca00", "BSD-3-Clause",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "valid"),
    Source("spyder", "6.1.8", "pypi", "spyder-6.1.8-py3-none-any.whl",
           "4da836742a7138c93392a8a0bd1a5ff40002cf92d217ef0e7bed11b522322f90", "MIT",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "&", "test"),
    Source("horizon", "27.0.0", "pypi", "horizon-27.0.0-py3-none-any.whl",
           "8a981dae4fb6626e71553aa185f6e429b0b1efb86b04b0a72c3b18ee04f1f990", "Apache-2.0",
           r"/locale/es/LC_MESSAGES/[^/]+\.(po|mo)$", "", "test"),
)
# fmt: on


def check_sources(sources: Sequence[Source]) -> None:
    """Raises ValueError, naming the row, for a table the build cannot use."""
    if {s.split for s in sources} != set(SPLITS) or len({s.name for s in sources}) != len(sources):
        raise ValueError(f"SOURCES must name each package once and put some in each of {SPLITS}.")
    for s in sources:
        problems = []
        if s.registry not in REGISTRIES:
            problems.append(f"registry {s.registry!r} is not one of {REGISTRIES}")
        if not re.fullmatch(r"[0-9a-f]{64}", s.sha256):
            problems.append("sha256 is not 64 lowercase hex digits")
        if s.split not in SPLITS:
            problems.append(f"split {s.split!r} is not one of {SPLITS}")
        if set(s.accelerators) - set(clean.ACCELERATORS):
            problems.append(f"accelerators {s.accelerators!r} are not among {clean.ACCELERATORS}")
        if not s.file.endswith((".whl", ".deb")) or "/" in s.file:
            problems.append(f"file {s.file!r} is not a bare .whl or .deb name")
        try:
            re.compile(s.catalogs)
        except re.error as e:
            problems.append(f"catalogs is not a regular expression ({e})")
        if problems:
            raise ValueError(f"SOURCES row {s.name}: " + "; ".join(problems) + ".")
