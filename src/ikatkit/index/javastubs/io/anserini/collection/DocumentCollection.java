package io.anserini.collection;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Path;

/** Compile-time stand-in for Anserini's class (its classes need javac 21); the real one is used at run time. */
public abstract class DocumentCollection<T extends SourceDocument> {
  protected Path path;

  public abstract FileSegment<T> createFileSegment(Path path) throws IOException;

  public abstract FileSegment<T> createFileSegment(BufferedReader reader) throws IOException;
}
