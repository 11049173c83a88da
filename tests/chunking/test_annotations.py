"""Machine annotations (``# renovate:``, ``# yaml-language-server:``, ``# shellcheck``, modelines,
...) are never chunk text, in any kind; a comment block made only of them documents nothing."""

from __future__ import annotations

import pytest

from varaverk.documents.annotations import (annotation_lines, is_annotation,
                                            strip_trailing_annotation)
from varaverk.documents.chunking import chunk_document

BIG = 100_000


def chunks(path: str, kind: str, text: str):
    return chunk_document(path, kind, text, max_tokens=BIG)


def all_text(found) -> str:
    return "\n".join(c.text for c in found)


@pytest.mark.parametrize("body", [
    " renovate: datasource=docker depName=ghcr.io/home-operations/sonarr",
    " renovate: datasource=github-releases depName=siderolabs/talos",
    " yaml-language-server: $schema=https://kubernetes-schemas.pages.dev/helm.json",
    ' {"$imagepolicy": "flux-system:podinfo"}', " @schema", " shellcheck disable=SC2034",
    " shellcheck source=/dev/null", " noqa: E501", " type: ignore[attr-defined]",
    " pylint: disable=invalid-name", " prettier-ignore", " -*- coding: utf-8 -*-",
    " -*- mode: yaml -*-", " vim: set ft=yaml ts=2 sw=2:", " vim: ft=sh",
    " yamllint disable-line rule:line-length",
    " code: language=ansible", " jinja2: lstrip_blocks: True", "cloud-config",
    " hadolint ignore=DL3008", "!/usr/bin/env bash", " syntax=docker/dockerfile:1",
    " x-release-please-version", " SPDX-License-Identifier: MIT", " fmt: off",
    " markdownlint-disable MD013", " kpt-set: ${image}", " $schema: https://json.schemastore.org/x",
])
def test_directives_for_tools_are_annotations(body):
    assert is_annotation(body)


@pytest.mark.parametrize("body", [
    " Renovate bumps this tag every Monday; pin it during the migration.",
    " -- Number of replicas (helm-docs description)",
    " @param image.registry MariaDB image registry",
    " The image is pulled from ghcr.io", " type of volume: nfs or local",
    " version of the chart", " Vim users: see docs/editors.md", " shellcheck is run in CI",
    " Backup photos to the NAS", " noqa is not used here",
])
def test_prose_is_not_an_annotation(body):
    assert not is_annotation(body)


def test_schema_blocks_and_emacs_local_variables_are_annotations_whole():
    lines = ["# @schema", "# type: string", "# required: true", "# @schema",
             "# -- The image tag", "tag: v1", "# Local Variables:", "# mode: yaml",
             "# End:", "# Real prose"]
    assert annotation_lines(lines) == {0, 1, 2, 3, 6, 7, 8}


def test_trailing_annotations_are_cut_from_value_lines_and_nothing_else():
    flux = '    image: ghcr.io/stefanprodan/podinfo:6.5.0 # {"$imagepolicy": "flux-system:podinfo"}'
    assert strip_trailing_annotation(flux) == "    image: ghcr.io/stefanprodan/podinfo:6.5.0"
    assert strip_trailing_annotation("color: '#fff'  # the accent") == \
        "color: '#fff'  # the accent"
    assert strip_trailing_annotation("x = 1  # noqa: E501") == "x = 1"
    whole = "    # renovate: datasource=docker depName=nginx"
    assert strip_trailing_annotation(whole) == whole


HELM_VALUES = """\
# yaml-language-server: $schema=https://example.invalid/app-template/values.schema.json
controllers:
  sonarr:
    containers:
      app:
        image:
          # renovate: datasource=docker depName=ghcr.io/onedr0p/sonarr
          repository: ghcr.io/onedr0p/sonarr
          tag: 4.0.2
        # -- Sonarr needs the media share writable by group 568
        securityContext:
          runAsGroup: 568
talos:
  # renovate: datasource=github-releases depName=siderolabs/talos
  version: v1.6.4
"""


def test_yaml_keys_documented_only_by_annotations_are_not_chunks():
    found = chunks("kubernetes/apps/sonarr/values.yaml", "template", HELM_VALUES)
    assert [c.title for c in found] == ["securityContext"]
    assert "media share writable" in found[0].text
    assert "renovate" not in all_text(found) and "yaml-language-server" not in all_text(found)


def test_a_yaml_file_whose_only_comments_are_annotations_documents_nothing():
    text = ("# yaml-language-server: $schema=https://json.schemastore.org/x.json\n"
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: media\n")
    assert chunks("kubernetes/ns.yaml", "template", text) == []
    text = "#cloud-config\npackage_update: true\n"
    assert chunks("cloud-init/user-data.yaml", "template", text) == []


def test_annotation_lines_are_dropped_from_documented_yaml_keys():
    text = ("services:\n  app:\n    # The app listens on 8080 behind traefik\n"
            "    # renovate: datasource=docker depName=nginx\n    image: nginx:1.25\n")
    (chunk,) = chunks("compose.yaml", "template", text)
    assert chunk.title == "image"
    assert "renovate" not in chunk.text and "listens on 8080" in chunk.text


def test_env_templates_drop_annotations():
    # Every key of an env template is a chunk (its line names it); annotations add nothing.
    text = ("# shellcheck disable=SC2034\nIMAGE_TAG=1.2\n\n"
            "# Where the backups go\n# renovate: datasource=docker\nBACKUP_DIR=/mnt/b\n")
    found = chunks("Deployment/app.env.example", "template", text)
    assert [(c.title, c.text) for c in found] == [
        ("IMAGE_TAG", "IMAGE_TAG=1.2"), ("BACKUP_DIR", "Where the backups go\nBACKUP_DIR=/mnt/b")]


def test_script_headers_skip_annotations():
    text = ("#!/usr/bin/env bash\n# shellcheck disable=SC1091\n# -*- mode: sh -*-\n"
            "# Backup photos to the NAS\nrsync -a /photos nas:/photos\n")
    (chunk,) = chunks("backup.sh", "header", text)
    assert chunk.text == "Backup photos to the NAS"
    assert (chunk.start_line, chunk.end_line) == (4, 4)


def test_a_script_whose_leading_comment_is_only_annotations_has_no_header():
    text = "#!/bin/sh\n# shellcheck shell=sh\n# vim: set ft=sh:\nrsync -a a b\n"
    assert chunks("sync.sh", "header", text) == []


def test_banner_sections_skip_annotations():
    text = ("#!/bin/bash\nset -e\n# ── settings ──\n# shellcheck disable=SC2034\nPORT=1\n"
            "# the host to back up\nHOST=nas\n")
    found = chunks("job.sh", "header", text)
    assert all_text(found) == "the host to back up\nHOST=nas"


def test_markdown_tool_markers_are_not_text():
    text = ("# Media stack\n\n<!-- markdownlint-disable MD033 -->\n<!-- toc -->\n\n"
            "Sonarr and Radarr share the media volume.\n\n<!-- a note for editors -->\n")
    (chunk,) = chunks("docs/media.md", "doc", text)
    assert "markdownlint" not in chunk.text and "toc" not in chunk.text
    assert "share the media volume" in chunk.text
    assert "a note for editors" in chunk.text


def test_a_toc_marker_after_a_heading_is_not_part_of_its_title():
    text = "# Lab\n\n## Networking <!-- omit in toc -->\n\nVLAN 20 holds the cameras.\n"
    found = chunks("README.md", "doc", text)
    assert [c.title for c in found] == ["Networking"]
    assert "omit" not in found[0].context and "omit" not in found[0].text
