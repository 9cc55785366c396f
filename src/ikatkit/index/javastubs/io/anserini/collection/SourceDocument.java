package io.anserini.collection;

/** Compile-time stand-in for Anserini's interface (its classes need javac 21); the real one is used at run time. */
public interface SourceDocument {
  String id();

  String contents();

  String raw();

  boolean indexable();
}
